package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
)

// TestMaskURL_R_K8_PasswordsNeverPrinted: every form of connection string
// the system reads has its password masked and everything else kept, so
// that a printed configuration still tells where it connects.
func TestMaskURL_R_K8_PasswordsNeverPrinted(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://msgx:s3cr%40t@db:5432/msgx?sslmode=verify-full":   "postgres://msgx:********@db:5432/msgx?sslmode=verify-full",
		"postgres://msgx@db/msgx?password=s3cret&sslmode=verify-full": "postgres://msgx@db/msgx?password=********&sslmode=verify-full",
		"postgres://msgx@db/msgx?sslpassword=s3cret":                  "postgres://msgx@db/msgx?sslpassword=********",
		"postgres://msgx@db/msgx":                                     "postgres://msgx@db/msgx",
		"host=db user=msgx password=s3cret sslmode=verify-full":       "host=db user=msgx password=******** sslmode=verify-full",
		"host=db password='s3 cr\\'et' dbname=msgx":                   "host=db password=******** dbname=msgx",
		"redis://:s3cret@redis:6379/0":                                "redis://:********@redis:6379/0",
		"rediss://default:s3cret@redis:6380/0":                        "rediss://default:********@redis:6380/0",
		"msgx:s3:cr@t@tcp(mailbox:3306)/msgx_mailbox?tls=true":        "msgx:********@tcp(mailbox:3306)/msgx_mailbox?tls=true",
		"root@tcp(127.0.0.1:3306)/msgx_mailbox":                       "root@tcp(127.0.0.1:3306)/msgx_mailbox",
		"${file:/etc/msgx/secrets/MSGX_POSTGRES_URL}":                 "${file:/etc/msgx/secrets/MSGX_POSTGRES_URL}",
		"postgres://msgx:s3cret@db:5432/msgx\x7f":                     "postgres://********",
		"": "",
	} {
		require.Equal(t, want, config.MaskURL(in), in)
	}
}
