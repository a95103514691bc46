// Command aileron is Aileron's daemon and its command-line client.
//
// main.go parses the command line and dispatches; daemon.go wires the
// packages into the running daemon (dependencies as struct fields); the
// other files are one subcommand group each. It may import anything; only
// here do the control-plane packages meet the data plane.
package main
