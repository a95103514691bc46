package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// Record is everything the proxy knows about one decision: the canonical log
// line and the audit event are both rendered from it. It never holds header
// values, query strings, bodies or credentials.
type Record struct {
	AuditID   string        `json:"audit_id"`
	Time      time.Time     `json:"time"`
	Event     string        `json:"event"`
	Session   string        `json:"session,omitempty"`
	Client    string        `json:"client,omitempty"`
	Method    string        `json:"method,omitempty"`
	Host      string        `json:"host,omitempty"`
	Port      int           `json:"port,omitempty"`
	Path      string        `json:"path,omitempty"`
	Verdict   string        `json:"decision"`
	Reason    string        `json:"reason"`
	FQN       string        `json:"connector,omitempty"`
	Version   string        `json:"connector_version,omitempty"`
	Hash      string        `json:"connector_hash,omitempty"`
	Tool      string        `json:"tool,omitempty"`
	Operation string        `json:"operation,omitempty"`
	Status    int           `json:"status,omitempty"`
	Upstream  int           `json:"upstream_status,omitempty"`
	BytesIn   int64         `json:"bytes_in"`
	BytesOut  int64         `json:"bytes_out"`
	Duration  time.Duration `json:"-"`
	UpstreamD time.Duration `json:"-"`
	Message   string        `json:"-"` // the client-facing sentence; logged, not audited
	// Fields are the operation's audit[] values, redacted by their rules.
	Fields map[string]any `json:"fields,omitempty"`
	// Decided is set once Recorder.Decided accepted the record, before
	// forwarding; Completed then reports the outcome of the same decision.
	Decided bool `json:"-"`
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
	rec := &Record{AuditID: p.ids.next(), Time: time.Now(), Event: "connector.proxy.rejected"}
	if r != nil {
		rec.Client = r.RemoteAddr
		rec.Method = r.Method
	}
	return rec
}

// refused fills the decision fields of a refusal.
func (rec *Record) refused(ref refusal) {
	rec.Event = "connector.proxy.rejected"
	rec.Verdict = policy.Deny.String()
	rec.Reason = string(ref.Reason)
	rec.Status = ref.Status
	rec.Message = ref.Message
}

// allowed fills the decision fields of an allowed request.
func (rec *Record) allowed(d policy.Decision) {
	rec.Event = "connector.proxy.proxied"
	rec.Verdict = d.Verdict.String()
	rec.Reason = string(d.Reason)
	if op := d.Op; op != nil {
		rec.FQN, rec.Version, rec.Hash, rec.Tool = op.FQN, op.Version, op.Hash, op.Tool
		rec.Operation = op.Spec.Name
	}
}

// finish writes the canonical log line and hands the record to the Recorder.
func (p *Proxy) finish(rec *Record) {
	rec.Duration = time.Since(rec.Time)
	ev := p.log.Info()
	if rec.Verdict == policy.Deny.String() {
		ev = p.log.Warn()
	}
	ev.Str("event", rec.Event).Str("audit_id", rec.AuditID).Str("session", rec.Session).
		Str("method", rec.Method).Str("host", rec.Host).Int("port", rec.Port).Str("path", rec.Path).
		Str("decision", rec.Verdict).Str("reason", rec.Reason).
		Str("connector", rec.FQN).Str("tool", rec.Tool).Str("operation", rec.Operation).
		Int("status", rec.Status).Int("upstream_status", rec.Upstream).
		Int64("bytes_in", rec.BytesIn).Int64("bytes_out", rec.BytesOut).
		Float64("duration_ms", float64(rec.Duration.Microseconds())/1000).
		Float64("upstream_ms", float64(rec.UpstreamD.Microseconds())/1000).
		Msg(rec.Message)
	if p.Recorder != nil {
		p.Recorder.Completed(rec)
	}
}
