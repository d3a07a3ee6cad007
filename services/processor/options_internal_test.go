package processor

import (
	"flag"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
)

// notFromFlags are the pipeline options no processor flag sets: the
// dependencies, and tuning the engine defaults by itself.
var notFromFlags = map[string]bool{
	"Logger": true, "Clock": true, "Meter": true, "Pool": true, "Kafka": true,
	"Elector": true, "Holder": true, "CleanupBatch": true, "SweepStep": true, "MaintenancePoll": true, "MarkerGrace": true,
	"JobSleep": true,
}

// TestEngineOptions_R_L8_R_H4_EveryFlagReachesTheEngine: with the flags' defaults
// (the two whose default is a zero value set otherwise: a zero option
// would be the engine's own default, not the flag's) and a changed value of each flag tested alone,
// every pipeline option that a flag sets arrives in the engine's options.
// A flag parsed and validated but not handed on (as a stall limit would
// be without its line in engineOptions) fails here: R-L8, R-H4, R-F6.
func TestEngineOptions_R_L8_R_H4_EveryFlagReachesTheEngine(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) Config {
		var c Config
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags("processor.", fs)
		require.NoError(t, fs.Parse(args))
		require.NoError(t, c.Validate())
		return c
	}
	options := func(c Config) reflect.Value {
		retry, _, _ := c.Pipeline.RetrySchedule()
		return reflect.ValueOf(engineOptions(c, Deps{Logger: logging.Discard()}, retry))
	}

	// The two flags whose defaults are zero values are set.
	o := options(parse("-processor.identity.include-day-boundary", "-processor.operation-day.cutoff-hour=4"))
	for i := range o.NumField() {
		name := o.Type().Field(i).Name
		if notFromFlags[name] {
			continue
		}
		require.False(t, o.Field(i).IsZero(), "pipeline option %s is not set from the processor's flags", name)
	}

	for flagArg, check := range map[string]func(reflect.Value) bool{
		"-processor.pipeline.stall-limit=7m":          func(o reflect.Value) bool { return o.FieldByName("StallLimit").Interface() == 7*time.Minute },
		"-processor.pipeline.head-deadline=13m":       func(o reflect.Value) bool { return o.FieldByName("HeadDeadline").Interface() == 13*time.Minute },
		"-processor.pipeline.self-check-interval=11s": func(o reflect.Value) bool { return o.FieldByName("SelfCheckInterval").Interface() == 11*time.Second },
		"-processor.pipeline.max-attempts=9":          func(o reflect.Value) bool { return o.FieldByName("MaxAttempts").Interface() == 9 },
	} {
		require.True(t, check(options(parse(flagArg))), "%s does not reach the engine", flagArg)
	}
}
