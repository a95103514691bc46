package main

import (
	"strings"

	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
)

// newSessionUnknownHelp describes --unknown of the commands that create a
// session for what they run (launch, sandbox run).
const newSessionUnknownHelp = unknownHelp + "; for the session --new creates (default deny)"

// checkNewSessionUnknown checks --unknown MODE of a command that creates a
// session: a mode sessions.CheckUnknown takes, and only for a new session
// (an existing one keeps its own: session update changes it).
func checkNewSessionUnknown(mode, sessID string) error {
	if mode == "" {
		return nil
	}
	if sessID != "" {
		return usagef("--unknown is set when a session is created: use it with --new, not --session (session %s keeps its own; "+
			"change it with `aileron session update %s --unknown %s`)", sessID, sessID, mode)
	}
	if _, err := sessions.CheckUnknown(mode); err != nil {
		return usagef("--unknown: %s", strings.TrimPrefix(err.Error(), state.ErrInvalidArgument.Error()+": "))
	}
	return nil
}
