-- Effects.Withdraw. KEYS[1]: the effect's hash. ARGV[1]: the result to
-- remove; another result is kept. The intents count and retention stay.
if redis.call('HGET', KEYS[1], 'r') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'r')
  return 1
end
return 0
