-- Version-guarded write of one flight into the projection.
-- KEYS[1] flights hash, KEYS[2] flight-versions hash, KEYS[3] the
-- flight-tombstones sorted set (FLID scored by the time its tombstone was
-- applied).
-- ARGV[1] FLID, ARGV[2] version (canonical non-negative decimal),
-- ARGV[3] "set" or "del", ARGV[4] the document (only for "set"),
-- ARGV[5] "repair" for a record of a projection rebuild, else "",
-- ARGV[6] the flight-versions field counting the documents of KEYS[1],
-- ARGV[7] the tombstone grace in seconds.
-- Returns 1 when written, 0 when the stored version is >= ARGV[2] (no-op).
-- A repair may also rewrite the stored version itself when the flight is
-- not what that version says (document lost or different, or present
-- although deleted): the version's state is immutable in PostgreSQL, so
-- this restores it; an older version is never written.
-- The document count moves with every field added to or removed from
-- KEYS[1], so a reader can tell a whole projection from one that lost
-- documents (R-H5).
-- The version memory stays bounded (R-L1): a deleted flight's version is
-- kept for the grace after its tombstone, then forgotten — each applied
-- tombstone forgets a few whose grace has passed. The processor never
-- publishes a version of a FLID below one it published before, so a
-- record produced after the grace is newer anyway; only a redelivered
-- older record could be older, and redelivery happens within minutes.
local function ge(a, b)
  -- canonical non-negative decimals: longer is larger, else compare as text;
  -- exact for every int64, unlike tonumber (a double)
  if #a ~= #b then return #a > #b end
  return a >= b
end
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur and ge(cur, ARGV[2]) then
  if ARGV[5] ~= 'repair' or cur ~= ARGV[2] then
    return 0
  end
  local doc = redis.call('HGET', KEYS[1], ARGV[1])
  if ARGV[3] == 'del' then
    if not doc then return 0 end
  elseif doc == ARGV[4] then
    return 0
  end
end
if ARGV[3] == 'del' then
  if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
    redis.call('HINCRBY', KEYS[2], ARGV[6], -1)
  end
  local now = tonumber(redis.call('TIME')[1])
  redis.call('ZADD', KEYS[3], now, ARGV[1])
  local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[7]), 'LIMIT', 0, 4)
  for _, f in ipairs(due) do
    if f ~= ARGV[1] and redis.call('HEXISTS', KEYS[1], f) == 0 then
      redis.call('HDEL', KEYS[2], f)
    end
    if f ~= ARGV[1] then
      redis.call('ZREM', KEYS[3], f)
    end
  end
else
  if redis.call('HSET', KEYS[1], ARGV[1], ARGV[4]) == 1 then
    redis.call('HINCRBY', KEYS[2], ARGV[6], 1)
  end
  redis.call('ZREM', KEYS[3], ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
