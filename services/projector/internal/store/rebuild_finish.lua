-- End of a rebuild of the projection from PostgreSQL (R-H5).
-- KEYS[1] flights hash, KEYS[2] flight-versions hash, KEYS[3] rebuild lock.
-- ARGV[1] the lock token of the caller, ARGV[2] the completeness marker
-- field, ARGV[3] the document count field, ARGV[4] the rebuild field (all
-- in KEYS[2]), ARGV[5] the marker's value.
-- Returns -1 when the caller no longer holds the lock (it expired, or
-- Redis lost it with everything else), 0 when Redis lost data again
-- during the rebuild, which must start over: the versions hash no longer
-- holds the caller's rebuild field, or the flights hash no longer holds
-- the documents counted since the rebuild began; 1 when the marker is
-- set: the projection is complete and served again. The lock is released
-- on 1.
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return -1
end
if redis.call('HGET', KEYS[2], ARGV[4]) ~= ARGV[1] then
  return 0
end
local docs = redis.call('HGET', KEYS[2], ARGV[3])
if not docs or tonumber(docs) ~= redis.call('HLEN', KEYS[1]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[5])
redis.call('HDEL', KEYS[2], ARGV[4])
redis.call('DEL', KEYS[3])
return 1
