package dataplane

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// maxAuditBody bounds how much of a request body is read, before
// forwarding, to extract body.* audit fields. A longer body is forwarded
// whole, but its body fields are not recorded.
const maxAuditBody = 64 << 10

// auditFields extracts the matched operation's audit[] values, already
// redacted by each field's rule, from the path variables, the raw query and
// (only when a field names the body) the first maxAuditBody bytes of a JSON
// body, which are put back in front of the rest for forwarding.
func auditFields(r *http.Request, d policy.Decision, rawQuery string) map[string]any {
	if d.Op == nil || len(d.Op.Spec.Audit) == 0 {
		return nil
	}
	fields := make([]audit.Field, len(d.Op.Spec.Audit))
	needBody := false
	for i, f := range d.Op.Spec.Audit {
		fields[i] = audit.Field{Name: f.Name, Source: f.Source, Redact: f.Redact}
		needBody = needBody || strings.HasPrefix(f.Source, "body.")
	}
	var body []byte
	if needBody && r.Body != nil && r.Body != http.NoBody {
		buf, err := io.ReadAll(io.LimitReader(r.Body, maxAuditBody+1))
		r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), Closer: r.Body}
		if err == nil && len(buf) <= maxAuditBody {
			body = buf
		}
	}
	return audit.Extract(fields, d.Params, rawQuery, body)
}

// prefixedBody replays bytes already read in front of the rest of a body.
type prefixedBody struct {
	io.Reader
	io.Closer
}
