package e2e_test

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"mvdan.cc/sh/v3/shell"

	"google.golang.org/grpc"

	"msgexchange/libs/kafka"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// aclUser is the Kafka SCRAM user (and, for the projector, the Redis user)
// of one service, made for one test.
type aclUser struct {
	name, password, passwordFile string
}

// TestGrants_R_K7_KafkaAndRedisACLsPerPrincipalRunTheServices runs every
// service as its own Kafka principal on a broker that enforces ACLs and
// starts with no topic, the projector also as its own Redis user, each
// granted exactly what `msgx -print-acls` prints for its target (the
// script is run line by line: the Kafka ACLs through the admin API, the
// Redis ACL SETUSER as printed). The services create their own topics,
// process a snapshot and FLOP changes, mark the mailbox rows, project
// Redis (a deletion too) and deliver a projection rebuild with no authorization refusal in
// any log and none in Redis's ACL LOG. Then each principal's forbidden
// requests are refused: producing to a topic it does not write, creating
// another topic, joining the projector's group, producing with the
// dispatcher's transactional ID (a broker-side squat of its fence), and,
// for the projector's Redis user, FLUSHALL, KEYS, CONFIG, a key outside
// its prefix.
func TestGrants_R_K7_KafkaAndRedisACLsPerPrincipalRunTheServices(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, stackOptions{broker: []kfake.Opt{kfake.EnableACLs()}, noTopics: true, privateRedis: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(s.kafkaOpts()...) // the broker's superuser
	require.NoError(t, err)
	defer admin.Close()
	adm := kadm.NewClient(admin)

	targets := []string{"ingest", "processor", "projector", "dispatcher"}
	users := map[string]aclUser{}
	for _, target := range targets {
		u := aclUser{name: "msgx_" + target, password: randomHex(t, 16)}
		u.passwordFile = filepath.Join(t.TempDir(), target+"-password")
		require.NoError(t, os.WriteFile(u.passwordFile, []byte(u.password+"\n"), 0o600))
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u.name, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: u.password}})
		require.NoError(t, err)
		require.NoError(t, res.Error())
		users[target] = u
		runACLScript(ctx, t, s, adm, printedACLs(t, s, target, u.name), u.password)
	}
	projectorRedis := redisURLAs(t, s.redisURL, users["projector"])
	as := func(target string, extra ...string) []string {
		u := users[target]
		return append([]string{"-kafka.create-topics=true", "-kafka.sasl.username=" + u.name, "-kafka.sasl.password-file=" + u.passwordFile}, extra...)
	}
	procs := map[string]*proc{"control": s.start("control")}
	procs["dispatcher"] = s.start("dispatcher", as("dispatcher")...)
	procs["projector"] = s.start("projector", as("projector", "-redis.url="+projectorRedis)...)
	procs["processor"] = s.start("processor", as("processor")...)
	procs["ingest"] = s.start("ingest", as("ingest")...)

	w := watchMarkers(s)
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(stndMessage(t, 15, 950001))
	s.insert(stndMessage(t, 16, 950002))
	s.insert(retarget(readCorpus(t, "FLOP-FDEL-1.xml"), 16, 950003)) // a removal from Redis too
	waitFor(t, 90*time.Second, "every row processed and marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)
	require.Equal(t, map[string]int{"SUCCEEDED": 4}, s.procStates())
	waitFor(t, 30*time.Second, "Redis caught up", func() (bool, error) {
		return s.projectionMatches(ctx)
	})
	conn, err := grpc.NewClient(s.controlAddr, s.controlCreds())
	require.NoError(t, err)
	defer conn.Close()
	control := controlv1.NewAdminServiceClient(conn)
	rb, err := control.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Operator: "acl-test", Reason: "R-K7 ACLs"})
	require.NoError(t, err)
	waitFor(t, 60*time.Second, "the rebuild delivered and applied", func() (bool, error) {
		got, err := control.GetRebuild(ctx, &controlv1.GetRebuildRequest{Generation: rb.GetRebuild().GetGeneration()})
		if err != nil {
			return false, err
		}
		d := got.GetRebuild().GetDelivery()
		if d.GetSent() != rb.GetRebuild().GetFlights() || d.GetManifestState() != controlv1.OutboxState_OUTBOX_STATE_SENT {
			return false, nil
		}
		return s.projectionMatches(ctx)
	})
	for target, p := range procs {
		log := p.own()
		require.NotContains(t, log, "AUTHORIZATION_FAILED", "%s was refused something it needs:\n%s", target, tail(log, 4000))
	}
	entries, err := s.redis.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	require.Empty(t, entries, "Redis refused the projector's user a command it needs")

	// What each principal may not do.
	asUser := func(target string, extra ...kgo.Opt) *kgo.Client {
		cfg := s.kafka
		cfg.SASL = kafka.SASL{Mechanism: secureMechanism, Username: users[target].name, PasswordFile: users[target].passwordFile}
		cl, err := kgo.NewClient(append(cfg.ClientOpts(slog.New(slog.DiscardHandler), "acl-test"), extra...)...)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	topics := s.kafka.Topics
	for target, topic := range map[string]string{"ingest": topics.Msg, "processor": topics.Inbox, "projector": topics.FlightState, "dispatcher": topics.Inbox} {
		// Not idempotent: the refusal is the topic's Write, not the
		// producer ID a principal that writes nothing cannot get either.
		err := asUser(target, kgo.DisableIdempotentWrite()).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("forged")}).FirstErr()
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "%s producing to %s", target, topic)
	}
	for _, target := range targets {
		res, err := kadm.NewClient(asUser(target)).CreateTopic(ctx, 1, 1, nil, "msgx.acl-test-"+target)
		if err == nil {
			err = res.Err
		}
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "%s creating a topic", target)
	}
	_, err = kadm.NewClient(asUser("dispatcher")).FetchOffsets(ctx, "msgx-projector")
	require.ErrorIs(t, err, kerr.GroupAuthorizationFailed, "the dispatcher reading the projector's group")
	squat := asUser("projector", kgo.TransactionalID(kafka.DispatcherTransactionalIDPrefix(s.kafka.ClientID)+"msg"))
	err = squat.BeginTransaction() // initialises the producer ID, or the first produce does
	if err == nil {
		err = squat.ProduceSync(ctx, &kgo.Record{Topic: topics.ProjectionAcks, Value: []byte("squat")}).FirstErr()
	}
	require.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed, "the projector producing as the dispatcher's transactions")

	opt, err := redis.ParseURL(projectorRedis)
	require.NoError(t, err)
	projector := redis.NewClient(opt)
	defer projector.Close()
	require.NoError(t, projector.Set(ctx, s.redisP+"acl-test", "1", 0).Err(), "a key of its prefix")
	for _, cmd := range [][]any{{"FLUSHALL"}, {"KEYS", "*"}, {"CONFIG", "GET", "maxmemory"}, {"SET", "other:acl-test", "1"}, {"ACL", "LIST"}} {
		err := projector.Do(ctx, cmd...).Err()
		require.Error(t, err, "%v", cmd)
		require.True(t, strings.HasPrefix(err.Error(), "NOPERM"), "%v: %v", cmd, err)
	}
}

// printedACLs is what `msgx -print-acls user -target target` prints with
// the stack's key prefix and the default names of the topics, groups and
// client ID (which the stack's services use).
func printedACLs(t *testing.T, s *stack, target, user string) string {
	t.Helper()
	out, err := exec.Command(msgxBin, "-target="+target, "-redis.key-prefix="+s.redisP, "-print-acls="+user).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// runACLScript carries out a -print-acls script as a site's administrator
// would, line by line: each kafka-acls.sh command through the admin API,
// the redis-cli command against the stack's Redis. A line of any other
// kind fails the test: the script and this runner would have drifted apart.
func runACLScript(ctx context.Context, t *testing.T, s *stack, adm *kadm.Client, script, password string) {
	t.Helper()
	env := map[string]string{"BOOTSTRAP": s.kafka.Brokers, "ADMIN_CONFIG": "admin.properties", "REDIS_ADMIN_URL": s.redisURL, "REDIS_PASSWORD": password}
	for _, line := range strings.Split(script, "\n") {
		if line == "" || strings.HasPrefix(line, "#") || line == "set -eu" {
			continue
		}
		f, err := shell.Fields(line, func(name string) string { return env[name] })
		require.NoError(t, err, line)
		switch f[0] {
		case "kafka-acls.sh":
			b := kadm.NewACLs()
			var ops []kmsg.ACLOperation
			for i := 1; i < len(f); i++ {
				flag := f[i]
				if flag == "--add" {
					continue
				}
				i++
				require.Less(t, i, len(f), "%s without its value: %s", flag, line)
				v := f[i]
				switch flag {
				case "--bootstrap-server", "--command-config":
				case "--allow-principal":
					b.Allow(v)
				case "--topic":
					b.Topics(v)
				case "--group":
					b.Groups(v)
				case "--transactional-id":
					b.TransactionalIDs(v)
				case "--resource-pattern-type":
					require.Equal(t, "prefixed", v, line)
					b.ResourcePatternType(kadm.ACLPatternPrefixed)
				case "--operation":
					op, err := kmsg.ParseACLOperation(v)
					require.NoError(t, err, line)
					ops = append(ops, op)
				default:
					t.Fatalf("unknown kafka-acls.sh flag %s: %s", flag, line)
				}
			}
			res, err := adm.CreateACLs(ctx, b.Operations(ops...))
			require.NoError(t, err, line)
			for _, r := range res {
				require.NoError(t, r.Err, line)
			}
		case "redis-cli":
			require.Equal(t, []string{"-u", s.redisURL}, f[1:3], line)
			args := make([]any, 0, len(f)-3)
			for _, a := range f[3:] {
				args = append(args, a)
			}
			require.NoError(t, s.redis.Do(ctx, args...).Err(), line)
		default:
			t.Fatalf("a line of -print-acls this runner does not know: %s", line)
		}
	}
}

// redisURLAs is base with u's name and password.
func redisURLAs(t *testing.T, base string, u aclUser) string {
	t.Helper()
	parsed, err := url.Parse(base)
	require.NoError(t, err)
	parsed.User = url.UserPassword(u.name, u.password)
	return parsed.String()
}
