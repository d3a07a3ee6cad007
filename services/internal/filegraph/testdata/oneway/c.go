package oneway

// C uses nothing of the package.
func C() int { return 1 }
