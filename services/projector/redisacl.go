package projector

// RedisCommands are the only Redis commands the projector sends: those of
// its store, its Lua scripts (Redis checks a script's calls against the
// caller's ACL too) and of the client's connection handshake. A site
// grants the projector's Redis user these and nothing else, on the keys of
// redis.key-prefix only (`msgx -print-acls`, docs/deployment.md, R-K7): no
// FLUSHALL, KEYS, CONFIG, DEBUG, MONITOR, ACL or SHUTDOWN, no key of
// another tenant. A command added to the store must be added here; the
// end-to-end test that runs the projector under exactly this ACL
// (TestGrants_R_K7_KafkaAndRedisACLsPerPrincipalRunTheServices) fails
// otherwise.
var RedisCommands = []string{
	// The connection: RESP3 handshake (AUTH is always allowed), the
	// database of the URL, the health check.
	"hello", "select", "ping",
	// Transactions of the store (TxPipelined) and its scripts: the first
	// EVALSHA that finds no script loads it, or runs it with EVAL.
	"multi", "exec", "discard", "evalsha", "eval", "script|load",
	// The projection: the flights hash, versions, completeness marker,
	// rebuild state, the locks and the grace set of deletions.
	"get", "set", "setnx", "del", "pexpire", "time",
	"hget", "hset", "hdel", "hexists", "hmget", "hgetall", "hkeys", "hlen", "hscan", "hincrby",
	"zadd", "zrem", "zscore", "zcard", "zrangebyscore",
}
