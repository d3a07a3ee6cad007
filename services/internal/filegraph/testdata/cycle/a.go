package cycle

// S is a type whose methods live in two files.
type S struct{ n int }

// Start calls a method of b.go.
func (s *S) Start() int { return s.step() }

// Leaf uses nothing of the package.
func Leaf() int { return 2 }
