// Package audit is Aileron's tamper-evident audit log: the Event schema, a
// hash-chained JSON-lines sink with rotation and group-committed fsync
// (Log), chain verification (Verify, VerifyDir), reading and following
// (Tail), and extraction of spec-declared audit fields with redaction
// (Extract).
//
// Chain format: every line is one JSON object (an Event) followed by '\n'.
// Line N carries seq N (starting at 1, +1 per line across all files) and
// prev_hash = lower-case hex SHA-256 of line N-1's bytes without its
// trailing newline; the first line of a log has prev_hash "". Files are
// named audit-<UTC timestamp>-<first seq>.jsonl so that sorting the names
// gives the chain order.
//
// It owns the one audit event schema (Event) and the closed set of event
// names (EventName); the data plane fills an Event and the sink writes it
// as it stands. It imports the standard library and zerolog (the canonical
// log line renders an Event), nothing of Aileron.
package audit
