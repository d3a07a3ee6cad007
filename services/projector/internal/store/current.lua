-- Raises the time the projection was last known to hold everything
-- msgx.flight-state had (R-N1), never lowers it: projector instances probe
-- independently and may report out of order.
-- KEYS[1] the key, ARGV[1] the time in Unix milliseconds.
-- Returns the stored time after the call.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local at = tonumber(ARGV[1])
if at > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return at
end
return cur
