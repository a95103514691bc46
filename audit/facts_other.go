//go:build !linux

package audit

// facts reads f's facts with Stat.
func facts(f file) (fileFacts, error) { return statFacts(f) }
