package ingest

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"msgexchange/libs/config"
	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// Config is the ingest service's configuration. Flag names are
// "<prefix>pipeline.poll-interval" and so on; YAML keys are snake_case
// under pipeline, mailbox and compat.
type Config struct {
	// Pipeline tunes the mailbox scan.
	Pipeline PipelineConfig `yaml:"pipeline"`
	// Mailbox describes the adapter's conventions in CMINMSGS.
	Mailbox MailboxConfig `yaml:"mailbox"`
	// Compat tunes POST /cminmsgs/send.
	Compat CompatConfig `yaml:"compat"`
	// Shadow runs beside the predecessor, which marks the rows it
	// processes (R-L6): the rows at or above mailbox.start-id are read and
	// published whether marked or not, so the gateway processes every one
	// of them. Set with dispatcher.shadow, which writes no marker. A
	// restart resumes from the run's position on the inbox topic
	// (shadowResume) rather than publishing the run again.
	Shadow bool `yaml:"shadow"`
	// StallLimit is how long the scanner may stay stalled — refused by the
	// broker or the mailbox in a way no wait cures — before the process
	// exits for its supervisor to restart it (R-L8). Default 1m.
	StallLimit time.Duration `yaml:"stall_limit"`
}

// PipelineConfig tunes the mailbox scan.
type PipelineConfig struct {
	// PollInterval is the time from the start of one scan round to the
	// start of the next (default 50ms); a compat insert starts a round at
	// once.
	PollInterval time.Duration `yaml:"poll_interval"`
	// ClaimBatch is the most rows one mailbox query returns (default 50).
	ClaimBatch int `yaml:"claim_batch"`
	// ReadAhead is how many unmarked new rows a round reads, page by page,
	// before it publishes them with one lease confirmation and one produce
	// (default 500).
	ReadAhead int `yaml:"read_ahead"`
	// FullRescanInterval is the time between the starts of reconciliation
	// passes over the whole table, spread over rounds, that find rows
	// committed late outside the gap window (default 10m).
	FullRescanInterval time.Duration `yaml:"full_rescan_interval"`
	// GapWindow is how long an ID missing below the highest ID read is
	// looked up again every round, so that a row committed after higher IDs
	// is published by the next round (default 1m).
	GapWindow time.Duration `yaml:"gap_window"`
	// RepublishAfter is how long a published row may stay unmarked before
	// it is published again (default 10m).
	RepublishAfter time.Duration `yaml:"republish_after"`
}

// MailboxConfig describes the adapter's conventions in CMINMSGS.
type MailboxConfig struct {
	// StatusFilter restricts the scan to rows with this CMINMSGS_STATUS
	// (default VALID); empty scans every status.
	StatusFilter string `yaml:"status_filter"`
	// ValidStatus is the CMINMSGS_STATUS compat inserts write (default
	// VALID).
	ValidStatus string `yaml:"valid_status"`
	// Zone is the IANA zone CMINMSGS DATETIMEs are written in (default
	// Asia/Shanghai).
	Zone string `yaml:"zone"`
	// StartID is the first CMINMSGS_ID this gateway reads (R-L6): the rows
	// below it belong to the predecessor, which processes and marks them;
	// they are never read, published or marked here. 0 reads every row.
	StartID int64 `yaml:"start_id"`
}

// CompatConfig tunes POST /cminmsgs/send.
type CompatConfig struct {
	// Addr is the listen address of the entry's own HTTP server (R-H10),
	// separate from the flight list, board and metrics of http.addr, so
	// that it gets its own Service and network policy. Empty (the default)
	// serves no compat entry.
	Addr string `yaml:"addr"`
	// MaxBody is the largest accepted body (default 10MiB, at most the
	// mailbox column's 16MiB-1).
	MaxBody ByteSize `yaml:"max_body"`
	// AllowedNetworks is a comma-separated list of CIDRs (or addresses)
	// allowed to post; empty allows every source (default empty).
	AllowedNetworks string `yaml:"allowed_networks"`
	// TrustedProxies is a comma-separated list of CIDRs (or addresses) of
	// the reverse proxies whose X-Forwarded-For names the client checked
	// against AllowedNetworks (default empty: the header is ignored).
	TrustedProxies string `yaml:"trusted_proxies"`
	// TokenFile, when set, is a file of bearer tokens (one a line, each at
	// least 32 bytes, re-read when it changes) of which every request must
	// carry one (default empty: no token; production refuses that, R-K1).
	TokenFile string `yaml:"token_file"`
	// Limits bound the requests per source address and in total (R-K9).
	Limits CompatLimits `yaml:"limits"`
}

// CompatLimits bound what the compat entry's senders may cost (R-K9):
// beyond a source's own rate or requests in flight the answer is 429,
// beyond the entry's total 503, both with Retry-After.
type CompatLimits = compat.Limits

// Defaults of the configuration.
const (
	// DefaultPollInterval is the default pipeline.poll-interval, the
	// seeds' lower bound. A round reads only the rows above the highest ID
	// read and the recent gaps, so its cost for the mailbox owner follows
	// the insert rate, not the poll (measured at 500 rows/s: about 950
	// handler reads/s at 50, 100 and 250 ms alike, 58 against 27 statements
	// per second); the poll only sets the wait, insert → on msgx.inbox p50
	// 26, 51 and 127 ms. Only 50 ms leaves room under R-J3's p50 of 50 ms
	// for the rest of the path (docs/performance.md).
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultClaimBatch is the default pipeline.claim-batch.
	DefaultClaimBatch = 50
	// DefaultReadAhead is the default pipeline.read-ahead: ten pages of
	// the default claim-batch. Every produce waits for a lease
	// confirmation, a round trip to the control plane and its PostgreSQL;
	// one per page held the scan to a page per round trip, about 240
	// rows/s with PostgreSQL 200 ms away (R-M2). A backlog is published
	// 500 rows a confirmation; a round that finds fewer publishes them at
	// once, so latency does not change (R-J3).
	DefaultReadAhead = 500
	// DefaultFullRescanInterval is the default pipeline.full-rescan-interval.
	DefaultFullRescanInterval = 10 * time.Minute
	// DefaultGapWindow is the default pipeline.gap-window: far above the
	// seconds a mailbox transaction takes, and cheap (a missing ID range is
	// one index probe a round).
	DefaultGapWindow = time.Minute
	// DefaultRepublishAfter is the default pipeline.republish-after.
	DefaultRepublishAfter = 10 * time.Minute
	// DefaultStatus is the adapter's status of rows to process, the default
	// of mailbox.status-filter and mailbox.valid-status.
	DefaultStatus = "VALID"
	// DefaultZone is the default mailbox.zone, the airport's.
	DefaultZone = "Asia/Shanghai"
	// DefaultMaxBody is the default compat.max-body, 10 MiB.
	DefaultMaxBody = 10 << 20
	// MaxClaimBatch bounds ClaimBatch: one page's IDs are bound as
	// statement parameters.
	MaxClaimBatch = 10000
	// Defaults of the compat limits (R-K9). The adapter posts one message
	// at a time at tens a second at most; the totals leave room for a few
	// such senders, and 8 bodies of 10MiB in flight stay within the ingest
	// pod's memory.
	DefaultCompatSourceRate       = 50
	DefaultCompatSourceBurst      = 100
	DefaultCompatSourceConcurrent = 4
	DefaultCompatTotalRate        = 200
	DefaultCompatTotalBurst       = 400
	DefaultCompatTotalConcurrent  = 8
	// maxStatusLen is the width of CMINMSGS_STATUS.
	maxStatusLen = 20
)

// RegisterFlags registers the flags under prefix and sets the defaults.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.DurationVar(&c.Pipeline.PollInterval, prefix+"pipeline.poll-interval", DefaultPollInterval,
		"time from the start of one mailbox scan round to the start of the next (a round that takes longer is followed at once); a compat insert starts a round at once. A round reads only new rows and recent gaps, so its mailbox cost follows the insert rate, not this interval; 50ms (the seeds' lower bound) is the one that leaves room for R-J3's p50 of 50 ms insert → msg event")
	fs.IntVar(&c.Pipeline.ClaimBatch, prefix+"pipeline.claim-batch", DefaultClaimBatch,
		"most mailbox rows one scan query returns; a round pages until a page is short (1.."+strconv.Itoa(MaxClaimBatch)+")")
	fs.IntVar(&c.Pipeline.ReadAhead, prefix+"pipeline.read-ahead", DefaultReadAhead,
		"most unmarked new rows a round reads, in pages of pipeline.claim-batch, before it publishes them together: one lease confirmation and one produce (within the scanner's 8 MB fetch budget) for them, where one per page made every page wait a round trip to the control plane; a round that finds fewer publishes them at once (1.."+strconv.Itoa(MaxClaimBatch)+")")
	fs.DurationVar(&c.Pipeline.FullRescanInterval, prefix+"pipeline.full-rescan-interval", DefaultFullRescanInterval,
		"time between the starts of reconciliation passes over the whole mailbox, spread over rounds, that find rows committed late outside pipeline.gap-window and forget marked rows")
	fs.DurationVar(&c.Pipeline.GapWindow, prefix+"pipeline.gap-window", DefaultGapWindow,
		"how long an ID missing below the highest ID read is looked up again every round: a row whose transaction commits after higher IDs were read is published by the next round within this window, later by the reconciliation pass")
	fs.DurationVar(&c.Pipeline.RepublishAfter, prefix+"pipeline.republish-after", DefaultRepublishAfter,
		"a published row still unmarked this long after its publication is published again")
	fs.StringVar(&c.Mailbox.StatusFilter, prefix+"mailbox.status-filter", DefaultStatus,
		"scan only CMINMSGS rows with this CMINMSGS_STATUS; empty scans every status")
	fs.StringVar(&c.Mailbox.ValidStatus, prefix+"mailbox.valid-status", DefaultStatus,
		"CMINMSGS_STATUS written by compat inserts")
	fs.StringVar(&c.Mailbox.Zone, prefix+"mailbox.zone", DefaultZone,
		"IANA time zone of the mailbox DATETIME columns (the airport's zone)")
	fs.Int64Var(&c.Mailbox.StartID, prefix+"mailbox.start-id", 0,
		"first CMINMSGS_ID read: rows below it are left to the predecessor, never read, published nor marked (R-L6 cutover); 0 reads every row")
	fs.BoolVar(&c.Shadow, prefix+"shadow", false,
		"shadow mode beside the predecessor (R-L6, with dispatcher.shadow): publish the rows at or above mailbox.start-id whether the predecessor marked them or not; needs mailbox.start-id. A restart resumes after the last row published, read from the inbox topic's last record; if that topic's retention removed every record and the rows from mailbox.start-id are older than it, the start is refused")
	fs.DurationVar(&c.StallLimit, prefix+"stall-limit", scanner.DefaultStallLimit,
		"longest the mailbox scanner may stay stalled (the broker refuses its producer — an authorization failure, an unsupported request —, or the mailbox refuses access or misses CMINMSGS) before the process exits for its supervisor to restart it; it reports not ready from the first refusal, and an unreachable broker or mailbox is not a stall (R-L8)")
	c.Compat.MaxBody = DefaultMaxBody
	fs.Var(&c.Compat.MaxBody, prefix+"compat.max-body",
		"largest POST /cminmsgs/send body, bytes or with a unit such as 10MiB or 10MB (default 10MiB; at most 16MiB-1)")
	fs.StringVar(&c.Compat.Addr, prefix+"compat.addr", "",
		"listen address of the compat entry POST /cminmsgs/send, its own HTTP server apart from http.addr, e.g. 0.0.0.0:8081; empty serves no compat entry")
	fs.StringVar(&c.Compat.AllowedNetworks, prefix+"compat.allowed-networks", "",
		"comma-separated CIDRs or addresses allowed to POST /cminmsgs/send (the client address, see compat.trusted-proxies); empty allows all")
	fs.StringVar(&c.Compat.TrustedProxies, prefix+"compat.trusted-proxies", "",
		"comma-separated CIDRs or addresses of reverse proxies whose X-Forwarded-For names the client; empty ignores the header")
	fs.StringVar(&c.Compat.TokenFile, prefix+"compat.token-file", "",
		"file of bearer tokens, one a line of at least 32 bytes, re-read when it changes: every compat request must carry one; empty requires none (refused in production mode)")
	l := &c.Compat.Limits
	fs.Float64Var(&l.SourceRate, prefix+"compat.limits.source-rate", DefaultCompatSourceRate,
		"compat requests per second one source address may send on average; beyond it 429 with Retry-After")
	fs.IntVar(&l.SourceBurst, prefix+"compat.limits.source-burst", DefaultCompatSourceBurst,
		"compat requests one source address may send at once above its rate")
	fs.IntVar(&l.SourceConcurrent, prefix+"compat.limits.source-concurrent", DefaultCompatSourceConcurrent,
		"compat requests of one source address in flight at once; beyond it 429")
	fs.Float64Var(&l.TotalRate, prefix+"compat.limits.total-rate", DefaultCompatTotalRate,
		"compat requests per second of every source together; beyond it 503 with Retry-After")
	fs.IntVar(&l.TotalBurst, prefix+"compat.limits.total-burst", DefaultCompatTotalBurst,
		"compat requests every source together may send at once above the total rate")
	fs.IntVar(&l.TotalConcurrent, prefix+"compat.limits.total-concurrent", DefaultCompatTotalConcurrent,
		"compat requests in flight at once in total (with compat.max-body it bounds the bodies' memory); beyond it 503")
}

// Validate reports every invalid setting.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration such as 1s, got %s", name, d))
		}
	}
	positive("pipeline.poll-interval", c.Pipeline.PollInterval)
	positive("pipeline.full-rescan-interval", c.Pipeline.FullRescanInterval)
	positive("pipeline.gap-window", c.Pipeline.GapWindow)
	positive("pipeline.republish-after", c.Pipeline.RepublishAfter)
	positive("stall-limit", c.StallLimit)
	if c.Pipeline.ClaimBatch < 1 || c.Pipeline.ClaimBatch > MaxClaimBatch {
		errs = append(errs, fmt.Errorf("pipeline.claim-batch: must be between 1 and %d, got %d", MaxClaimBatch, c.Pipeline.ClaimBatch))
	}
	if c.Pipeline.ReadAhead < 1 || c.Pipeline.ReadAhead > MaxClaimBatch {
		errs = append(errs, fmt.Errorf("pipeline.read-ahead: must be between 1 and %d, got %d", MaxClaimBatch, c.Pipeline.ReadAhead))
	}
	if len(c.Mailbox.StatusFilter) > maxStatusLen {
		errs = append(errs, fmt.Errorf("mailbox.status-filter: CMINMSGS_STATUS holds at most %d characters, got %q", maxStatusLen, c.Mailbox.StatusFilter))
	}
	switch {
	case c.Mailbox.ValidStatus == "":
		errs = append(errs, errors.New("mailbox.valid-status: must not be empty; the adapter's value is VALID"))
	case len(c.Mailbox.ValidStatus) > maxStatusLen:
		errs = append(errs, fmt.Errorf("mailbox.valid-status: CMINMSGS_STATUS holds at most %d characters, got %q", maxStatusLen, c.Mailbox.ValidStatus))
	case c.Mailbox.StatusFilter != "" && c.Mailbox.StatusFilter != c.Mailbox.ValidStatus:
		errs = append(errs, fmt.Errorf("mailbox.valid-status %q does not pass mailbox.status-filter %q: compat messages would never be published; make them equal",
			c.Mailbox.ValidStatus, c.Mailbox.StatusFilter))
	}
	if c.Mailbox.StartID < 0 {
		errs = append(errs, fmt.Errorf("mailbox.start-id: must be 0 (every row) or a CMINMSGS_ID, got %d", c.Mailbox.StartID))
	}
	if c.Shadow && c.Mailbox.StartID < 1 {
		errs = append(errs, errors.New("shadow: needs mailbox.start-id, the first row of the shadow run; without it every marked row of the mailbox's history would be published"))
	}
	if _, err := c.Mailbox.location(); err != nil {
		errs = append(errs, err)
	}
	if c.Compat.MaxBody < 1 || c.Compat.MaxBody > mailbox.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("compat.max-body: must be between 1 and %d bytes (the mailbox column's capacity), got %d", mailbox.MaxMessageBytes, c.Compat.MaxBody))
	}
	if _, err := c.Compat.Networks(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Compat.Proxies(); err != nil {
		errs = append(errs, err)
	}
	if c.Compat.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Compat.Addr); err != nil {
			errs = append(errs, fmt.Errorf("compat.addr %q: want host:port, e.g. 0.0.0.0:8081: %w", c.Compat.Addr, err))
		}
	}
	if c.Compat.TokenFile != "" {
		if err := compat.CheckTokenFile(c.Compat.TokenFile); err != nil {
			errs = append(errs, fmt.Errorf("compat.token-file: %w", err))
		}
	}
	l := c.Compat.Limits
	for _, v := range []struct {
		name string
		ok   bool
	}{
		{"compat.limits.source-rate", l.SourceRate > 0},
		{"compat.limits.source-burst", l.SourceBurst > 0},
		{"compat.limits.source-concurrent", l.SourceConcurrent > 0},
		{"compat.limits.total-rate", l.TotalRate > 0},
		{"compat.limits.total-burst", l.TotalBurst > 0},
		{"compat.limits.total-concurrent", l.TotalConcurrent > 0},
	} {
		if !v.ok {
			errs = append(errs, fmt.Errorf("%s: must be positive (R-K9: the entry is never unbounded)", v.name))
		}
	}
	return errors.Join(errs...)
}

// ValidateProduction refuses, for production mode (R-K1), a compat entry
// that listens without a bearer-token file or without an allowed-networks
// list: either alone leaves a forged message (a DNLD that deletes a day's
// flights) one POST away for whoever reaches the port. The prefix names
// the keys, e.g. "ingest.".
func (c *Config) ValidateProduction(prefix string) error {
	if c.Compat.Addr == "" {
		return nil
	}
	var errs []error
	if c.Compat.TokenFile == "" {
		errs = append(errs, config.Refusal(prefix+"compat.token-file", "the compat entry on "+c.Compat.Addr+" needs a file of bearer tokens (at least 32 bytes each), or any client that reaches it can store messages"))
	}
	if strings.TrimSpace(c.Compat.AllowedNetworks) == "" {
		errs = append(errs, config.Refusal(prefix+"compat.allowed-networks", "the compat entry on "+c.Compat.Addr+" needs the list of networks of its senders (CIDRs), or every address may post"))
	}
	return errors.Join(errs...)
}

// location loads Zone.
func (c *MailboxConfig) location() (*time.Location, error) {
	if c.Zone == "" {
		return nil, errors.New("mailbox.zone: must not be empty; use the airport's IANA zone such as Asia/Shanghai")
	}
	loc, err := time.LoadLocation(c.Zone)
	if err != nil {
		return nil, fmt.Errorf("mailbox.zone: unknown zone %q (use an IANA name such as Asia/Shanghai): %w", c.Zone, err)
	}
	return loc, nil
}

// Networks parses AllowedNetworks. A bare address means that host only.
func (c *CompatConfig) Networks() ([]netip.Prefix, error) {
	return parsePrefixes("compat.allowed-networks", c.AllowedNetworks)
}

// Proxies parses TrustedProxies.
func (c *CompatConfig) Proxies() ([]netip.Prefix, error) {
	return parsePrefixes("compat.trusted-proxies", c.TrustedProxies)
}

// parsePrefixes parses a comma-separated list of CIDRs and addresses.
func parsePrefixes(key, list string) ([]netip.Prefix, error) {
	var (
		out  []netip.Prefix
		errs []error
	)
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %q is neither a CIDR such as 10.0.0.0/8 nor an address", key, s))
	}
	return out, errors.Join(errs...)
}

// ByteSize is a size in bytes. Flags and YAML accept a plain number of bytes
// or a number with a unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB
// (powers of 1000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// String renders the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// Set parses a size (flag.Value).
func (b *ByteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	factor := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) {
			factor = u.factor
			s = strings.TrimSpace(s[:len(s)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor {
		return fmt.Errorf("invalid size %q: use bytes or a number with KiB, MiB, GiB, KB, MB or GB", s)
	}
	*b = ByteSize(n * factor)
	return nil
}

// UnmarshalYAML accepts a number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a size must be a number or a string such as 10MiB", n.Line)
	}
	return b.Set(n.Value)
}

// MarshalYAML renders the size as String does.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }
