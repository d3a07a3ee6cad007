package board

import "errors"

// ErrClosed is returned by Subscribe once the broadcaster has stopped.
var ErrClosed = errors.New("flight board broadcaster stopped")
