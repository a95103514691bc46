package dataplane

import (
	"net/http"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// peekRequest reads, before the approval gate and before anything is
// sent, what the record needs from the start of r's body in one pass (see
// peekBody: at most maxBodyPrefix bytes, parsed as a stream, put back in
// front of the rest): the model a model call asks for and the values of
// the operation's body.* audit fields. When whole is not nil (the session
// limits the models, and readWhole read the body), the model is read from
// the whole body instead (onlyModel), so that no later or differently
// cased "model" key can send another model than the one checked.
func peekRequest(r *http.Request, op *policy.Operation, path string, whole []byte) (model string, body map[string]any) {
	if op == nil {
		return "", nil
	}
	paths := audit.BodyPaths(auditSpec(op))
	readModel := op.Spec.Usage == policy.UsageAnthropic || op.Spec.Usage == policy.UsageOpenAI
	checked := whole != nil
	if readModel && checked {
		model = onlyModel(whole)
	} else if readModel {
		paths = append(paths, "model")
	}
	body = peekBody(r, paths)
	switch {
	case op.Spec.Usage == policy.UsageGemini:
		model = geminiModel(path)
	case readModel && !checked:
		model, _ = body["model"].(string)
	}
	return clipModel(model), body
}

// auditSpec is op's audit[] entries in audit's terms.
func auditSpec(op *policy.Operation) []audit.Field {
	if op == nil || len(op.Spec.Audit) == 0 {
		return nil
	}
	fields := make([]audit.Field, len(op.Spec.Audit))
	for i, f := range op.Spec.Audit {
		fields[i] = audit.Field{Name: f.Name, Source: f.Source, Redact: f.Redact}
	}
	return fields
}

// auditFields extracts the matched operation's audit[] values, already
// redacted by each field's rule, from the path variables, the raw query
// and the body values peekRequest found.
func auditFields(d policy.Decision, rawQuery string, body map[string]any) map[string]any {
	fields := auditSpec(d.Op)
	if fields == nil {
		return nil
	}
	return audit.ExtractFound(fields, d.Params, rawQuery, body)
}
