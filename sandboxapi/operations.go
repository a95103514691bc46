package sandboxapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// OperationInfo is one operation as discovery shows it: what a caller needs
// to call it (POST /v1/connector-operations/run takes its connector_fqn,
// tool and operation) and the JSON Schemas of its arguments and answer.
type OperationInfo struct {
	ConnectorFQN     string   `json:"connector_fqn"`
	Version          string   `json:"version"`
	Tool             string   `json:"tool"`
	Operation        string   `json:"operation"`
	Summary          string   `json:"summary,omitempty"`
	Description      string   `json:"description,omitempty"`
	Method           string   `json:"method"`
	Path             string   `json:"path"`
	Hosts            []string `json:"hosts"`
	ApprovalRequired bool     `json:"approval_required"`
	// Credential is the kind of credential Aileron adds ("" for none); the
	// secret and its binding are never shown.
	Credential string `json:"credential,omitempty"`
	// InputSchema is the effective JSON Schema of the arguments object
	// (policy.Operation.InputSchema); {"type":"object"} when the operation
	// declares none.
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema is the declared JSON Schema of the answer, if any.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// OperationList is the answer of GET /v1/operations.
type OperationList struct {
	Operations []OperationInfo `json:"operations"`
}

// anyObject is the input schema of an operation that declares none.
var anyObject = json.RawMessage(`{"type":"object"}`)

// operationsFor lists the operations sess may call through the sandbox: its
// connectors' external operations that declare a method, path and host,
// sorted by connector, tool and operation; only connector fqn's when fqn is
// not "".
func operationsFor(pol *policy.Policy, sess *dataplane.Session, fqn string) []OperationInfo {
	out := []OperationInfo{}
	for _, o := range pol.Operations() {
		s := o.Spec
		if !sess.MayUse(o.FQN) || (fqn != "" && o.FQN != fqn) || s.IsInternal() || s.Method == "" || s.Path == "" || len(o.Hosts) == 0 {
			continue
		}
		info := OperationInfo{ConnectorFQN: o.FQN, Version: o.Version, Tool: o.Tool, Operation: s.Name,
			Summary: s.Summary, Description: s.Description, Method: s.Method, Path: s.Path,
			ApprovalRequired: o.RequiresApproval(), Credential: s.Credential.Kind,
			InputSchema: o.InputSchema(), OutputSchema: o.OutputSchema()}
		if len(info.InputSchema) == 0 {
			info.InputSchema = anyObject
		}
		for _, h := range o.Hosts {
			info.Hosts = append(info.Hosts, h.String())
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b OperationInfo) int {
		return cmpJoin(a.ConnectorFQN, a.Tool, a.Operation, b.ConnectorFQN, b.Tool, b.Operation)
	})
	return out
}

func cmpJoin(a1, a2, a3, b1, b2, b3 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	if c := strings.Compare(a2, b2); c != 0 {
		return c
	}
	return strings.Compare(a3, b3)
}

// discoveryConnector reads the only query parameter discovery takes,
// ?connector=FQN, refusing any other.
func discoveryConnector(r *http.Request) (string, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "connector" {
			return "", fmt.Errorf("%w: unknown query parameter %s; the only one is connector=FQN", state.ErrInvalidArgument, clipPath(k))
		}
	}
	if len(q["connector"]) > 1 {
		return "", fmt.Errorf("%w: connector= is given more than once; name one connector", state.ErrInvalidArgument)
	}
	fqn := q.Get("connector")
	if _, set := q["connector"]; set && fqn == "" {
		return "", fmt.Errorf("%w: connector= is empty; name a connector FQN, or leave the parameter out", state.ErrInvalidArgument)
	}
	return fqn, nil
}

// listOperations answers GET /v1/operations[?connector=FQN].
func (s *API) listOperations(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	fqn, err := discoveryConnector(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	list, err := s.Operations(sess, fqn)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeTagged(w, r, list)
}

// Operations lists the operations sess may call (GET /v1/operations), only
// those of connector fqn when it is not "".
//
// Errors: a connector fqn the session may not use or that is not installed
// wraps state.ErrNotFound.
func (s *API) Operations(sess *dataplane.Session, fqn string) (OperationList, error) {
	pol := s.policy()
	if fqn != "" && (!sess.MayUse(fqn) || !installed(pol, fqn)) {
		return OperationList{}, fmt.Errorf("%w: connector %s is not available to this session; GET /v1/operations lists what is", state.ErrNotFound, strconv.Quote(fqn))
	}
	return OperationList{Operations: operationsFor(pol, sess, fqn)}, nil
}

func installed(pol *policy.Policy, fqn string) bool {
	for _, o := range pol.Operations() {
		if o.FQN == fqn {
			return true
		}
	}
	return false
}

// getOperation answers GET /v1/operations/{tool}/{operation}[?connector=FQN].
func (s *API) getOperation(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	fqn, err := discoveryConnector(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.Operation(sess, fqn, r.PathValue("tool"), r.PathValue("operation"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeTagged(w, r, info)
}

// Operation describes operation op of tool for sess, of connector fqn (""
// when the tool and operation name one operation of the session).
//
// Errors: an operation the session cannot call (unknown, internal, out of
// scope, or not of fqn) wraps state.ErrNotFound, with one message for all;
// a pair that more than one connector of the session offers wraps
// state.ErrConflict and names them.
func (s *API) Operation(sess *dataplane.Session, fqn, tool, op string) (OperationInfo, error) {
	var found []OperationInfo
	for _, info := range operationsFor(s.policy(), sess, fqn) {
		if info.Tool == tool && info.Operation == op {
			found = append(found, info)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		where := ""
		if fqn != "" {
			where = " of connector " + strconv.Quote(fqn)
		}
		return OperationInfo{}, fmt.Errorf("%w: no operation %s%s is available to this session; GET /v1/operations lists them",
			state.ErrNotFound, clipPath(tool+"/"+op), where)
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = f.ConnectorFQN
	}
	return OperationInfo{}, fmt.Errorf("%w: operation %s is offered by %s; add ?connector=FQN to name one",
		state.ErrConflict, clipPath(tool+"/"+op), strings.Join(names, ", "))
}

// writeTagged answers v as JSON with a strong ETag, the digest of the body,
// and 304 Not Modified when If-None-Match names it.
func writeTagged(w http.ResponseWriter, r *http.Request, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil { // plain strings and valid JSON only: cannot happen
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusInternalServerError, Class: dataplane.ClassInternal,
			Reason: policy.ReasonInternalError, Message: "encoding the answer failed"})
		return
	}
	sum := sha256.Sum256(b.Bytes())
	etag := `"sha256-` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if matchesETag(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// matchesETag reports whether an If-None-Match value names etag (or is *).
func matchesETag(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == etag || t == "W/"+etag {
			return true
		}
	}
	return false
}

// runCall runs one operation call for sess through the same path as POST
// /v1/connector-operations/run: a completed call is the answer, a refusal by
// the pipeline is returned as a *dataplane.Refusal error.
func (s *API) runCall(ctx context.Context, sess *dataplane.Session, req OperationRequest) (dataplane.CallResult, error) {
	if !sess.MayUse(req.ConnectorFQN) {
		return dataplane.CallResult{}, fmt.Errorf("%w: connector %q is not available to this session", state.ErrNotFound, req.ConnectorFQN)
	}
	call, _, err := actions.OperationCall(s.policy(), req.ConnectorFQN, req.Tool, req.Operation, req.Args)
	if err != nil {
		return dataplane.CallResult{}, err
	}
	if s.Exec == nil {
		return dataplane.CallResult{}, fmt.Errorf("%w: this daemon does not run connector operations for the sandbox", errFeatureDisabled)
	}
	call.Session, call.Wait = sess, s.ApprovalWait
	return s.Exec.Execute(ctx, call)
}
