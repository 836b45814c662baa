-- Placeholder on branch s20-serverops only: version 2 is the triggers
-- branch's (002_triggers). Delete this file when that branch is merged;
-- migrate.Load wants versions without gaps, and 003 is this branch's.
SELECT 1;
