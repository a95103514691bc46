// Package testkit holds what the control-plane packages' tests share: a
// settable clock, a logger whose lines a test can read, the realistic specs
// of policy/testdata, and a database in a temporary home. Only tests import
// it (archtest enforces that); it imports state, zerolog and the standard
// library.
package testkit
