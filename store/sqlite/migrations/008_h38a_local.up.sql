-- local placeholder (h38a testing only; never committed)
SELECT 1;
