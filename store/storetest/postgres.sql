-- Queries of storetest's PostgreSQL helpers (see store/sqlfile).

-- name: test_schemas
-- Schemas made by PostgresURL: rt_<unix seconds>_<random>.
SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rt\_%'
