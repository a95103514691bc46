package policy

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// Validate checks s against every rule of aileron.connector.v1 and returns
// all problems joined with errors.Join, each a *ValidationError (wrapping
// ErrInvalidSpec) whose File is file. It also rejects two operations of the
// spec that would match the same requests equally, and compiles each
// operation's argument and output schemas (see Operation.CheckArguments),
// refusing one that does not compile or could not be checked in bounded
// time.
func (s *Spec) Validate(file string) error { return s.validate(file, nil) }

// validate is Validate; when out is not nil it also receives each
// operation's compiled argument schema.
func (s *Spec) validate(file string, out map[*OperationSpec]*argSchema) error {
	p := &problems{file: file}
	if s.SchemaVersion != SchemaVersion {
		p.add("$.schema_version", ruleSchemaVersion, fmt.Sprintf("schema_version is %s; it must be %s", quote(s.SchemaVersion), quote(SchemaVersion)))
	}
	if msg := fqnProblem(s.Connector.FQN); msg != "" {
		p.add("$.connector.fqn", ruleFQN, msg)
	}
	if msg := semverProblem(s.Connector.Version); msg != "" {
		p.add("$.connector.version", ruleSemVer, msg)
	}
	if len(s.Tools) == 0 {
		p.add("$.tools", ruleToolsEmpty, "the spec declares no tools; add at least one tool with one operation")
	}
	tools := map[string]string{}
	for i := range s.Tools {
		validateTool(&s.Tools[i], idx("$.tools", i), tools, out, p)
	}
	if len(p.errs) == 0 {
		checkSpecRoutes(s, p)
	}
	return p.err()
}

func validateTool(t *Tool, path string, seen map[string]string, out map[*OperationSpec]*argSchema, p *problems) {
	validateName("tool", t.Name, path+".name", seen, p)
	if len(t.Operations) == 0 {
		p.add(path+".operations", ruleOperationsEmpty, fmt.Sprintf("tool %s declares no operations; each tool needs at least one", quote(t.Name)))
	}
	ops := map[string]string{}
	for j := range t.Operations {
		op := &t.Operations[j]
		a := validateOperation(op, idx(path+".operations", j), ops, p)
		if out != nil && a != nil {
			out[op] = a
		}
	}
}

// validateName checks a name and its uniqueness within seen (name → path).
func validateName(what, name, path string, seen map[string]string, p *problems) {
	if rule, msg := checkName(what, name); rule != "" {
		p.add(path, rule, msg)
		return
	}
	if prev, dup := seen[name]; dup {
		p.add(path, ruleNameDuplicate, fmt.Sprintf("%s name %s is already used at %s; names must be unique", what, quote(name), prev))
		return
	}
	seen[name] = path
}

func validateOperation(op *OperationSpec, path string, seen map[string]string, p *problems) *argSchema {
	validateName("operation", op.Name, path+".name", seen, p)
	if op.Method != "" {
		if rule, msg := checkMethod(op.Method); rule != "" {
			p.add(path+".method", rule, msg)
		}
	}
	var pat *pattern
	if op.Path != "" {
		var rule, msg string
		if pat, rule, msg = parsePattern(op.Path); rule != "" {
			p.add(path+".path", rule, msg)
		}
	}
	hosts := map[Authority]string{}
	for k, h := range op.Hosts {
		hp := idx(path+".hosts", k)
		a, rule, msg := parseHostEntry(h)
		if rule != "" {
			p.add(hp, rule, msg)
			continue
		}
		if prev, dup := hosts[a]; dup {
			p.add(hp, ruleHostDuplicate, fmt.Sprintf("host %s is the same as %s (%s); list each host once", quote(h), prev, a))
			continue
		}
		hosts[a] = hp
	}
	switch op.Idempotency {
	case "", Idempotent, NotIdempotent:
	default:
		p.add(path+".idempotency", ruleIdempotency, fmt.Sprintf("idempotency %s is unknown; use \"idempotent\" or \"not_idempotent\"", quote(op.Idempotency)))
	}
	switch op.Approval {
	case "", ApprovalNone, ApprovalRequired:
	default:
		p.add(path+".approval", ruleApproval, fmt.Sprintf("approval %s is unknown; use \"required\" or \"none\"", quote(op.Approval)))
	}
	if !op.Credential.IsZero() {
		validateCredential(op.Credential, path+".credential", p)
	}
	switch {
	case op.WebSocket && op.Method != "GET":
		p.add(path+".websocket", ruleWebSocket, fmt.Sprintf("websocket is only for a GET operation (a WebSocket opens with a GET), this one's method is %s; set \"method\": \"GET\" or drop websocket", quote(op.Method)))
	case op.WebSocket && op.RequiresApproval():
		p.add(path+".websocket", ruleWebSocket, "an operation that opens a WebSocket cannot need approval: every handshake carries a fresh random "+
			"Sec-WebSocket-Key, so no retry could match an approval, and the frames after it are not inspected anyway; drop \"approval\": \"required\" or websocket")
	}
	switch op.Usage {
	case "", UsageAnthropic, UsageOpenAI, UsageGemini:
	default:
		p.add(path+".usage", ruleUsage, fmt.Sprintf("usage %s is unknown; use \"anthropic\", \"openai\" or \"gemini\" (the model API the operation speaks), or drop it", quote(op.Usage)))
	}
	inputs := map[string]string{}
	for k := range op.Inputs {
		validateInput(&op.Inputs[k], idx(path+".inputs", k), inputs, p)
	}
	audit := map[string]string{}
	for k := range op.Audit {
		validateAudit(&op.Audit[k], idx(path+".audit", k), audit, op.Path, pat, p)
	}
	switch op.Visibility {
	case "", VisibilityExternal, VisibilityInternal:
	default:
		p.add(path+".visibility", ruleVisibility, fmt.Sprintf("visibility %s is unknown; use \"external\" (the default) or \"internal\" (reachable only as a step of an action)", quote(op.Visibility)))
	}
	return validateArgs(op, path, pat, p)
}

func validateInput(in *Input, path string, seen map[string]string, p *problems) {
	validateName("input", in.Name, path+".name", seen, p)
	if in.Type != "" && !slices.Contains(inputTypes(), in.Type) {
		hint := ""
		if c, ok := Closest(strings.ToLower(in.Type), inputTypes()); ok {
			hint = fmt.Sprintf("did you mean %q? ", c)
		}
		p.add(path+".type", ruleInputType, fmt.Sprintf("input type %s is unknown; %suse string, integer, number, boolean, array or object", quote(in.Type), hint))
	}
}

func validateAudit(a *AuditField, path string, seen map[string]string, opPath string, pat *pattern, p *problems) {
	validateName("audit field", a.Name, path+".name", seen, p)
	switch a.Redact {
	case RedactKeep, RedactHash, RedactDrop:
	case "":
		p.add(path+".redact", ruleAuditRedact, "redact is required; use \"keep\", \"hash\" or \"drop\"")
	default:
		p.add(path+".redact", ruleAuditRedact, fmt.Sprintf("redact %s is unknown; use \"keep\", \"hash\" or \"drop\"", quote(a.Redact)))
	}
	where, name, ok := strings.Cut(a.Source, ".")
	if !ok || name == "" || (where != "query" && where != "body" && where != "path") {
		p.add(path+".source", ruleAuditSource, fmt.Sprintf("source %s must be \"query.NAME\", \"body.NAME\" or \"path.VAR\"", quote(a.Source)))
		return
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isNameByte(c) && c != '[' && c != ']' {
			p.add(path+".source", ruleAuditSource, fmt.Sprintf("source %s contains %s; use letters, digits, '.', '_', '-', ':', '[' or ']'", quote(a.Source), quote(string(rune(c)))))
			return
		}
	}
	if where != "path" {
		return
	}
	if pat != nil {
		for _, v := range pat.vars {
			if v == name {
				return
			}
		}
	}
	if opPath == "" {
		p.add(path+".source", ruleAuditPathVar, fmt.Sprintf("source %s names a path variable but the operation has no path", quote(a.Source)))
		return
	}
	p.add(path+".source", ruleAuditPathVar, fmt.Sprintf("source %s names path variable %s, which path %s does not define; add {%s} to the path or fix the name", quote(a.Source), quote(name), quote(opPath), name))
}

func validateCredential(c Credential, path string, p *problems) {
	switch c.Kind {
	case CredentialOAuth2, CredentialAPIKey, CredentialBearer, CredentialBasic, CredentialAWSSigV4:
	case "":
		p.add(path+".kind", ruleCredentialKind, "credential kind is missing; use "+credentialKindsList)
		return
	default:
		p.add(path, ruleCredentialKind, fmt.Sprintf("credential kind %s is unknown; use %s", quote(c.Kind), credentialKindsList))
		return
	}
	validatePlace(CredentialPlace{Header: c.Header, Format: c.Format, Query: c.Query}, path, p)
	if c.Kind == CredentialAWSSigV4 {
		if c.Header != "" || c.Query != "" || c.Format != "" {
			p.add(path, ruleCredentialPlace, "aws_sigv4 signs the request itself; remove header, query and format")
		}
		if c.Service != "" && !validServiceName(c.Service) {
			p.add(path+".service", ruleCredentialSvc, fmt.Sprintf("AWS service %s must be lower-case letters, digits and dashes, e.g. \"execute-api\"", quote(c.Service)))
		}
	} else if c.Service != "" {
		p.add(path+".service", ruleCredentialSvc, fmt.Sprintf("service is only meaningful for aws_sigv4, not %s; remove it", quote(c.Kind)))
	}
	validateAlternatives(c, path, p)
}

// validatePlace checks one place's header, query and format.
func validatePlace(c CredentialPlace, path string, p *problems) {
	if c.Header != "" {
		if !IsToken(c.Header) {
			p.add(path+".header", ruleCredentialHeader, fmt.Sprintf("credential header %s is not a valid HTTP header name", quote(c.Header)))
		} else if ReservedHeader(c.Header) {
			p.add(path+".header", ruleCredentialHeader, fmt.Sprintf("credential header %s is a connection or framing header and cannot carry a credential", quote(c.Header)))
		}
	}
	if c.Query != "" && !validQueryName(c.Query) {
		p.add(path+".query", ruleCredentialQuery, fmt.Sprintf("credential query parameter %s must use only letters, digits, '-', '.', '_' or '~'", quote(c.Query)))
	}
	if c.Header != "" && c.Query != "" {
		p.add(path, ruleCredentialPlace, "credential sets both header and query; choose one placement")
	}
	if c.Format != "" {
		if msg := formatProblem(c.Format); msg != "" {
			p.add(path+".format", ruleCredentialFormat, msg)
		}
	}
}

// validateAlternatives checks a credential's alternative places: only token
// kinds have them, each names a header or a query parameter, and no two
// places (the primary one included, which defaults to Authorization) share
// a header or a query parameter.
func validateAlternatives(c Credential, path string, p *problems) {
	if len(c.Alternatives) == 0 {
		return
	}
	if c.Kind == CredentialBasic || c.Kind == CredentialAWSSigV4 {
		p.add(path+".alternatives", ruleCredentialAlt, fmt.Sprintf("alternatives are for api_key, bearer and oauth2 credentials, not %s; remove them", c.Kind))
		return
	}
	seen := map[string]string{placeKey(CredentialPlace{Header: c.Header, Query: c.Query}): path}
	for i, alt := range c.Alternatives {
		ap := idx(path+".alternatives", i)
		if alt.Header == "" && alt.Query == "" {
			p.add(ap, ruleCredentialAlt, "an alternative place needs a header or a query parameter")
			continue
		}
		validatePlace(alt, ap, p)
		k := placeKey(alt)
		if prev, dup := seen[k]; dup {
			p.add(ap, ruleCredentialAlt, fmt.Sprintf("this place (%s) is already named at %s; each place may appear once", k, prev))
			continue
		}
		seen[k] = ap
	}
}

// placeKey names the location of a place, for duplicate checks: "header
// NAME" (canonical) or "query NAME"; no header and no query is the default
// header Authorization.
func placeKey(c CredentialPlace) string {
	switch {
	case c.Query != "" && c.Header == "":
		return "query " + c.Query
	case c.Header == "":
		return "header Authorization"
	}
	return "header " + textproto.CanonicalMIMEHeaderKey(c.Header)
}

// ReservedHeader reports connection-level and framing headers that must
// never carry an injected credential (Host, Content-Length, hop-by-hop…).
func ReservedHeader(h string) bool {
	switch h = textproto.CanonicalMIMEHeaderKey(h); h {
	case "Host", "Content-Length":
		return true
	}
	return HopByHop(h)
}

// HopByHop reports the hop-by-hop headers (RFC 9110 section 7.6.1, and the
// older ones proxies drop too), by canonical name: they describe one
// connection and are never forwarded as sent.
func HopByHop(canonical string) bool {
	switch canonical {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

func validQueryName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && strings.IndexByte("-._~", c) < 0 {
			return false
		}
	}
	return len(s) <= maxNameLen
}

func validServiceName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return len(s) <= 64
}

// formatProblem checks a credential format: printable text (no control
// characters, so no header injection) with at least one well-formed
// placeholder such as {token}, and no stray braces.
func formatProblem(f string) string {
	placeholders := 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("credential format %s contains a control character", quote(f))
		case c == '}':
			return fmt.Sprintf("credential format %s has a '}' without '{'", quote(f))
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 || !isIdent(f[i+1:i+end]) {
				return fmt.Sprintf("credential format %s has a malformed placeholder; write e.g. \"Bearer {token}\" or \"{key}\"", quote(f))
			}
			if name := f[i+1 : i+end]; name != "token" && name != "key" {
				return fmt.Sprintf("credential format %s uses {%s}; the secret is written {token} or {key}", quote(f), name)
			}
			placeholders++
			i += end
		}
	}
	if placeholders == 0 {
		return fmt.Sprintf("credential format %s has no placeholder; write e.g. \"Bearer {token}\" or \"{key}\"", quote(f))
	}
	return ""
}

// checkSpecRoutes reports operations of one spec that would match the same
// requests equally. It runs only on an otherwise valid spec.
func checkSpecRoutes(s *Spec, p *problems) {
	seen := map[string]string{} // route key → JSON path + description
	for i := range s.Tools {
		t := &s.Tools[i]
		for j := range t.Operations {
			op := &t.Operations[j]
			opPath := idx(idx("$.tools", i)+".operations", j)
			for _, key := range routeKeys(op) {
				desc := fmt.Sprintf("operation %s/%s at %s (%s %s)", t.Name, op.Name, opPath, op.Method, op.Path)
				if prev, dup := seen[key.key]; dup {
					p.add(opPath, ruleOperationClash, fmt.Sprintf("%s on %s matches the same requests as %s; make the paths differ or merge the operations", desc, key.auth, prev))
					break
				}
				seen[key.key] = desc
			}
		}
	}
}

// routeKey identifies the requests one operation matches on one authority.
type routeKey struct {
	key  string
	auth Authority
	pat  *pattern
}

// routeKeys returns one key per host of a routable, valid operation (nil
// when the operation has no method, path or hosts).
func routeKeys(op *OperationSpec) []routeKey {
	if op.Method == "" || op.Path == "" || len(op.Hosts) == 0 {
		return nil
	}
	pat, rule, _ := parsePattern(op.Path)
	if rule != "" {
		return nil
	}
	shape := pat.shape()
	keys := make([]routeKey, 0, len(op.Hosts))
	for _, h := range op.Hosts {
		a, rule, _ := parseHostEntry(h)
		if rule != "" {
			continue
		}
		keys = append(keys, routeKey{key: a.String() + " " + op.Method + " " + shape, auth: a, pat: pat})
	}
	return keys
}
