package processor_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfig_R_B9_R_C12_REGNStaysOnTheDefaultIgnoreList: the default
// ignore list is the seeds' LDM, REGN, RSTA, EROR; IgnoredTypes reads a
// configured list the way the processor applies it — upper case, blanks
// and repeats dropped — and is what the control plane refuses RQRDs for.
func TestConfig_R_B9_R_C12_REGNStaysOnTheDefaultIgnoreList(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"LDM", "REGN", "RSTA", "EROR"}, parse(t).Pipeline.IgnoredTypes())
	c := parse(t, "-processor.pipeline.ignore-types= regn, ,ldm,REGN")
	require.Equal(t, []string{"REGN", "LDM"}, c.Pipeline.IgnoredTypes())
	require.Empty(t, parse(t, "-processor.pipeline.ignore-types=").Pipeline.IgnoredTypes())
}
