// Package config loads the daemon's configuration: embedded defaults, then an
// optional YAML file, then AILERON_* environment variables, then flags. Every
// value is validated once, at load, and an error names the key and says how to
// fix it.
//
// It imports koanf and pflag, nothing of Aileron: the daemon's wiring in
// cmd/aileron maps the validated Config onto the packages.
package config
