// Package audit is Aileron's tamper-evident audit log: the Event schema, a
// hash-chained JSON-lines sink with rotation and group-committed fsync
// (Log), the RFC 6962 Merkle tree over its lines with signed C2SP
// checkpoints written into the trail (Key, Checkpoint), the check of the
// trail against the record of its last checkpoint (Mark, Anchor,
// TrailError), verification of chain, tree and checkpoints (Verify,
// VerifyTrail), inclusion and consistency proofs (Prove, Proof,
// ProveConsistency), reading and following (Tail), the OCSF rendering
// (OCSF), and extraction of spec-declared audit fields with redaction
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
// as it stands. It imports the standard library, zerolog (the canonical
// log line renders an Event) and golang.org/x/mod/sumdb/note and tlog
// (signed notes, RFC 6962 hashes and proof checks), and of Aileron only
// printable (which characters a line writes as escapes).
package audit
