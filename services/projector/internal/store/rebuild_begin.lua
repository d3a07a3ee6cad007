-- Start of a rebuild of the projection from PostgreSQL (R-H5).
-- KEYS[1] flights hash, KEYS[2] flight-versions hash, KEYS[3] rebuild lock.
-- ARGV[1] the lock token of the caller, ARGV[2] the completeness marker
-- field, ARGV[3] the document count field, ARGV[4] the rebuild field (all
-- in KEYS[2]).
-- Returns -1 when the caller does not hold the lock, 0 when the projection
-- is complete after all (another instance finished a rebuild meanwhile;
-- nothing changes), 1 when started: the marker is removed, so that every
-- reader of every instance answers "not complete" until the rebuild
-- finishes, the document count restarts from what the flights hash holds
-- now, and the rebuild field holds the token: if the versions hash is lost
-- during the rebuild, the field goes with it and the rebuild cannot finish.
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return -1
end
local n = redis.call('HLEN', KEYS[1])
local docs = redis.call('HGET', KEYS[2], ARGV[3])
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 and docs and tonumber(docs) == n then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], n, ARGV[4], ARGV[1])
return 1
