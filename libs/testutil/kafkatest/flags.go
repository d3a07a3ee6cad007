package kafkatest

import "flag"

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("kafkatest", flag.ContinueOnError) }
