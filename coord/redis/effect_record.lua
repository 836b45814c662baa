-- Effects.Record. KEYS[1]: the effect's hash. ARGV[1]: the result,
-- ARGV[2]: retention in milliseconds. The first result wins.
redis.call('HSETNX', KEYS[1], 'r', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
