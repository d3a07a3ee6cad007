// Package config loads a service's configuration in one fixed order: flag
// defaults, then the YAML file named by -config.file (with ${VAR} and
// ${file:PATH} expansion when -config.expand-env is set, which is how
// secrets arrive in Kubernetes: from a Secret mounted as files),
// then flags given explicitly on the command line. Each component's Config
// registers its own flags with a dotted prefix (kafka.brokers,
// pipeline.poll-interval); the YAML keys mirror the prefixes.
package config
