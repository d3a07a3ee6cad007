-- Removal of one stale flight from the projection (a projection rebuild
-- found it in Redis but not in PostgreSQL).
-- KEYS[1] flights hash, KEYS[2] flight-versions hash.
-- ARGV[1] FLID, ARGV[2] the document the caller judged stale,
-- ARGV[3] the version to keep at least (canonical non-negative decimal),
-- ARGV[4] the flight-versions field counting the documents of KEYS[1].
-- Returns 1 when removed, 0 when the flight's document is no longer
-- ARGV[2] (written meanwhile: it is not judged, nothing changes).
-- Like a tombstone, the removal keeps a version (raised to ARGV[3] when
-- lower or absent), so a record of that version or older cannot
-- resurrect the flight.
local function ge(a, b)
  if #a ~= #b then return #a > #b end
  return a >= b
end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], ARGV[4], -1)
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[3] ~= '0' and not (cur and ge(cur, ARGV[3])) then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
return 1
