package oneway

// A uses B's type and C's function: a.go is above b.go and c.go.
func A() T { return T{N: C()} }
