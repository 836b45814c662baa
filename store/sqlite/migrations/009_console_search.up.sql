-- Issue 38's filter on input values needs no index on SQLite (the embedded
-- default): it compares each row's input with ->, which an expression
-- index could serve only for one fixed path. This version keeps the two
-- stores' migrations numbered alike.
SELECT 1;
