-- Renewal or release of the rebuild lock by its holder.
-- KEYS[1] the lock, ARGV[1] the holder's token, ARGV[2] "renew" or
-- "release", ARGV[3] the new time to live in milliseconds (for "renew").
-- Returns 1 when done, 0 when the caller does not hold the lock.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'release' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
