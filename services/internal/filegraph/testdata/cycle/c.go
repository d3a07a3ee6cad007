package cycle

// C is above the cycle: it depends on it, nothing depends on it.
func C() int { return (&S{}).Start() }
