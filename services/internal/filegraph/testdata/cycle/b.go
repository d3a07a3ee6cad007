package cycle

// step reads a field of a.go's type: a.go and b.go use each other.
func (s *S) step() int { return s.n + Leaf() }
