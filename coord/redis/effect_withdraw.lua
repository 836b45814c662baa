-- Effects.Withdraw. KEYS[1]: the effect's hash. ARGV[1]: the result to
-- remove; another result is kept. ARGV[2]: retention in milliseconds. The
-- intents count stays.
local removed = 0
if redis.call('HGET', KEYS[1], 'r') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'r')
  removed = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return removed
