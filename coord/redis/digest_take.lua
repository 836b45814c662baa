-- Digests.Take and Forget. KEYS: [1] the key's open digest (hash, o: its
-- opener), [2] the opener's values list. ARGV: [1] opener, [2] "forget" to
-- drop the values.
-- Closes the digest if it is the open one; returns its values (none when
-- forgetting).
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then redis.call('DEL', KEYS[1]) end
if ARGV[2] == 'forget' then
  redis.call('DEL', KEYS[2])
  return {}
end
return redis.call('LRANGE', KEYS[2], 0, -1)
