package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// Record is everything the proxy knows about one decision. Its audit.Event
// is the audit line itself, filled by the pipeline and written by the
// Recorder as it stands (the sink adds time, seq and prev_hash); the
// canonical log line is rendered from the same Event. The other fields are
// the pipeline's own and are never audited. A Record never holds header
// values, query strings, bodies or credentials.
type Record struct {
	audit.Event
	// Start is when the proxy began handling the request; DurationMS is
	// measured from it.
	Start time.Time
	// Message is the client-facing sentence: logged, not audited.
	Message string
	// Decided is set once Recorder.Decided accepted the record, before
	// forwarding; Completed then reports the outcome of the same decision.
	Decided bool
	// API is the usage dialect of a model call's operation
	// (policy.OperationSpec.Usage: "anthropic", "openai", "gemini"); ""
	// for any other request.
	API string
}

// Recorder receives decisions. Decided runs before an allowed request is
// forwarded; an error refuses the request (fail closed). Completed runs once
// the exchange ends.
type Recorder interface {
	Decided(r *Record) error
	Completed(r *Record)
}

// auditIDs hands out unique audit ids without a system call per request: a
// random per-process prefix and a counter.
type auditIDs struct {
	prefix string
	n      atomic.Uint64
}

func newAuditIDs() *auditIDs {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &auditIDs{prefix: "a_" + hex.EncodeToString(b[:])}
}

func (a *auditIDs) next() string {
	var b [16]byte
	return a.prefix + string(strconv.AppendUint(b[:0], a.n.Add(1)+1<<40, 16))
}

func (p *Proxy) newRecord(r *http.Request) *Record {
	rec := &Record{Event: audit.Event{Name: audit.EventRejected, AuditID: p.ids.next()}, Start: time.Now()}
	if r != nil {
		rec.Client = r.RemoteAddr
		rec.Method = r.Method
	}
	return rec
}

// refused fills the decision fields of a refusal.
func (rec *Record) refused(ref Refusal) {
	rec.Name = audit.EventRejected
	rec.Decision = policy.Deny.String()
	rec.Reason = string(ref.Reason)
	rec.Status = ref.Status
	rec.Message = ref.Message
}

// allowed fills the decision fields of an allowed request (operation
// named its operation when the decision was made).
func (rec *Record) allowed(d policy.Decision) {
	rec.Name = audit.EventProxied
	rec.Decision = d.Verdict.String()
	rec.Reason = string(d.Reason)
}

// operation names the matched operation, if any, so that a refusal after
// the decision (at the approval gate, say) says what it refused.
func (rec *Record) operation(op *policy.Operation) {
	if op != nil {
		rec.Connector, rec.ConnectorVersion, rec.ConnectorHash, rec.Tool = op.FQN, op.Version, op.Hash, op.Tool
		rec.Operation = op.Spec.Name
	}
}

// finish writes the canonical log line and hands the record to the Recorder.
func (p *Proxy) finish(rec *Record) {
	rec.DurationMS = ms(time.Since(rec.Start))
	ev := p.log.Info()
	if rec.Decision == policy.Deny.String() {
		ev = p.log.Warn()
	}
	ev.EmbedObject(&rec.Event).Msg(rec.Message)
	if p.Recorder != nil {
		p.Recorder.Completed(rec)
	}
}

// ms is d in milliseconds, to the microsecond, as the audit line has it.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
