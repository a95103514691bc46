// Package printable makes text that came from outside (what a sandbox
// sent, a line read back from a file) safe to show a human on a terminal
// or a page: every character that would act on the display instead of
// showing as itself (a control, a direction change, an invisible or
// unassigned character, a byte that is not UTF-8) becomes a visible
// escape. The CLI, the approvals web page, the approval preview and the
// audit trail's encoder all escape through it, so one rule decides.
//
// It imports only the standard library.
package printable
