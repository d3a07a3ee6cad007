package config

import "errors"

// ErrNoCertificate is reported when a CA file holds no PEM certificate
// (an empty file, a key, or a certificate in DER form), which would
// otherwise leave the client trusting nothing or, worse, be mistaken for
// the system's roots.
var ErrNoCertificate = errors.New("no PEM certificate in the file")
