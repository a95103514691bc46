package action

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Limits on manifest names.
const (
	maxActionName = 64
	maxStepID     = 64
	maxInputName  = 128
	maxTypeName   = 64
)

// validate reports every rule m breaks.
func (m *Manifest) validate(p *problems) {
	if rule, msg := checkActionName(m.Name); rule != "" {
		p.add("name", rule, msg)
	}
	checkVersion("version", m.Version, p)
	required := m.validateRequires(p)
	inputs := m.validateInputs(p)
	if len(m.Steps) == 0 {
		p.add("execute", ruleStepsEmpty, "the action has no [[execute]] steps; add at least one with id, connector and op")
	}
	ids := map[string]int{}
	for i := range m.Steps {
		m.validateStep(i, ids, required, p)
	}
	for i := range m.Steps {
		m.validateStepRefs(i, ids, inputs, p)
	}
	m.validatePreview(inputs, p)
}

// checkActionName: letters, digits and dashes, not starting or ending with
// a dash, at most maxActionName bytes.
func checkActionName(name string) (rule, msg string) {
	const fix = `; use letters, digits and dashes, e.g. "send-email"`
	switch {
	case name == "":
		return ruleRequired, "name is missing" + fix
	case len(name) > maxActionName:
		return ruleName, fmt.Sprintf("name %s is %d bytes long; the limit is %d", quote(name), len(name), maxActionName)
	case name[0] == '-' || name[len(name)-1] == '-':
		return ruleName, fmt.Sprintf("name %s must not start or end with a dash", quote(name)) + fix
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' {
			return ruleName, fmt.Sprintf("name %s contains %s", quote(name), quote(string(rune(c)))) + fix
		}
	}
	return "", ""
}

// checkVersion reports a version that is missing or not strict SemVer.
func checkVersion(key, v string, p *problems) {
	if v == "" {
		p.add(key, ruleRequired, key+` is missing; write a SemVer version such as "1.0.0"`)
		return
	}
	if err := policy.CheckSemVer(v); err != nil {
		p.add(key, ruleSemVer, err.Error())
	}
}

// checkFQN reports a connector reference that is missing or malformed.
func checkFQN(key, fqn string, p *problems) bool {
	if fqn == "" {
		p.add(key, ruleRequired, key+` is missing; write the connector FQN, e.g. "github://acme/aileron-connector-google"`)
		return false
	}
	if err := policy.CheckFQN(fqn); err != nil {
		p.add(key, ruleFQN, err.Error())
		return false
	}
	return true
}

// validateRequires checks [[requires.connectors]] and returns the names
// listed.
func (m *Manifest) validateRequires(p *problems) map[string]bool {
	names := map[string]bool{}
	for i, r := range m.Requires {
		key := idx("requires.connectors", i)
		if checkFQN(key+".name", r.Name, p) {
			if names[r.Name] {
				p.add(key+".name", ruleDuplicate, fmt.Sprintf("connector %s is listed twice in [[requires.connectors]]; keep one entry", quote(r.Name)))
			}
			names[r.Name] = true
		}
		checkVersion(key+".version", r.Version, p)
		validateHash(key, r, p)
		validateCapabilities(key, r.Capabilities, p)
	}
	return names
}

// validateInputs checks [[inputs]] and returns the declared names.
func (m *Manifest) validateInputs(p *problems) map[string]bool {
	names := map[string]bool{}
	for i, in := range m.Inputs {
		key := idx("inputs", i)
		switch msg := inputNameProblem(in.Name); {
		case msg != "":
			p.add(key+".name", ruleName, msg)
		case names[in.Name]:
			p.add(key+".name", ruleDuplicate, fmt.Sprintf("input %s is declared twice; input names must be unique", quote(in.Name)))
		default:
			names[in.Name] = true
		}
		if msg := typeProblem(in.Type); msg != "" {
			p.add(key+".type", ruleInputType, msg)
		}
		if in.ItemsType != "" {
			if msg := typeProblem(in.ItemsType); msg != "" {
				p.add(key+".items_type", ruleInputType, msg)
			}
		}
	}
	return names
}

func inputNameProblem(name string) string {
	if name == "" {
		return `input name is missing; add name = "..." (letters, digits, '_', '.', '-')`
	}
	if len(name) > maxInputName {
		return fmt.Sprintf("input name is %d bytes long; the limit is %d", len(name), maxInputName)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return fmt.Sprintf("input name %s contains %s; use letters, digits, '_', '.' or '-'", quote(name), quote(string(rune(c))))
		}
	}
	if name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, "..") {
		return fmt.Sprintf("input name %s has an empty dot-separated part", quote(name))
	}
	return ""
}

// typeProblem checks a free-form type name: printable, at most
// maxTypeName bytes.
func typeProblem(t string) string {
	if strings.TrimSpace(t) == "" {
		return `type is empty; write a type such as "string", "integer", "object" or "[String]", or remove the key (default "string")`
	}
	if len(t) > maxTypeName {
		return fmt.Sprintf("type %s is %d bytes long; the limit is %d", quote(t), len(t), maxTypeName)
	}
	for _, r := range t {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("type %s contains a control character", quote(t))
		}
	}
	return ""
}

// validateStep checks one step's fields; ids maps valid step ids to their
// index.
func (m *Manifest) validateStep(i int, ids map[string]int, required map[string]bool, p *problems) {
	s := m.Steps[i]
	key := idx("execute", i)
	switch msg := stepIDProblem(s.ID); {
	case msg != "":
		p.add(key+".id", ruleStepID, msg)
	default:
		if j, dup := ids[s.ID]; dup {
			p.add(key+".id", ruleDuplicate, fmt.Sprintf("step id %s is already used by execute[%d]; step ids must be unique", quote(s.ID), j))
		} else {
			ids[s.ID] = i
		}
	}
	if checkFQN(key+".connector", s.Connector, p) && !required[s.Connector] {
		p.add(key+".connector", ruleRequirement, fmt.Sprintf("connector %s is not listed in [[requires.connectors]]; add an entry with its name, version and hash (listed: %s)",
			quote(s.Connector), list(sortedSet(required))))
	}
	if strings.TrimSpace(s.Op) == "" {
		p.add(key+".op", ruleRequired, `op is missing; name the connector operation the step runs, e.g. op = "messages.send"`)
	}
}

func stepIDProblem(id string) string {
	if id == "" {
		return `step id is missing; add id = "..." (lower-case letters, digits, '_' or '-')`
	}
	if len(id) > maxStepID {
		return fmt.Sprintf("step id is %d bytes long; the limit is %d", len(id), maxStepID)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Sprintf("step id %s contains %s; use lower-case letters, digits, '_' or '-'", quote(id), quote(string(rune(c))))
		}
	}
	if id == argsRoot {
		return `step id "args" is reserved for ${args.NAME}; choose another id`
	}
	return ""
}

// validateStepRefs checks every template in step i's inputs: ${args.X}
// must name a declared input, ${STEP…} an earlier step.
func (m *Manifest) validateStepRefs(i int, ids map[string]int, inputs map[string]bool, p *problems) {
	s := m.Steps[i]
	walkStrings(s.Inputs, idx("execute", i)+".inputs", func(key, str string) {
		segs, err := scanTemplate(str)
		if err != nil {
			p.add(key, ruleTemplate, err.Error())
			return
		}
		for _, sg := range segs {
			if sg.ref == "" {
				continue
			}
			if msg := m.refProblem(sg.ref, i, ids, inputs); msg != "" {
				p.add(key, ruleTemplate, msg)
			}
		}
	})
}

// refProblem checks one reference made by step i (i < 0: the preview).
func (m *Manifest) refProblem(ref string, i int, ids map[string]int, inputs map[string]bool) string {
	parts := strings.Split(ref, ".")
	if parts[0] == argsRoot {
		for k := len(parts); k > 1; k-- {
			if inputs[strings.Join(parts[1:k], ".")] {
				return ""
			}
		}
		if len(parts) == 1 {
			return ""
		}
		return fmt.Sprintf("${%s} names no declared input; declare it in [[inputs]] or use one of %s", ref, list(sortedSet(inputs)))
	}
	if i < 0 {
		return fmt.Sprintf("${%s}: the preview is shown before any step runs, so it can only use ${args.NAME}", ref)
	}
	j, ok := ids[parts[0]]
	switch {
	case !ok:
		return fmt.Sprintf("${%s} refers to %s, which is neither \"args\" nor a step id; earlier steps: %s", ref, quote(parts[0]), list(m.stepIDs(i)))
	case j == i:
		return fmt.Sprintf("${%s} refers to the step's own output, which does not exist yet; use an earlier step or ${args.NAME}", ref)
	case j > i:
		return fmt.Sprintf("${%s} refers to step %s, which runs later (execute[%d]); steps run in order, so move it before this one", ref, quote(parts[0]), j)
	}
	return ""
}

func (m *Manifest) stepIDs(before int) []string {
	var ids []string
	for _, s := range m.Steps[:before] {
		ids = append(ids, s.ID)
	}
	return ids
}

func (m *Manifest) validatePreview(inputs map[string]bool, p *problems) {
	if m.Approval.Preview == "" {
		return
	}
	segs, err := scanTemplate(m.Approval.Preview)
	if err != nil {
		p.add("approval.preview", ruleTemplate, err.Error())
		return
	}
	for _, sg := range segs {
		if sg.ref != "" {
			if msg := m.refProblem(sg.ref, -1, nil, inputs); msg != "" {
				p.add("approval.preview", ruleTemplate, msg)
			}
		}
	}
}

// walkStrings calls fn for every string in v (maps and arrays
// recursively), in a deterministic order.
func walkStrings(v any, key string, fn func(key, s string)) {
	switch t := v.(type) {
	case string:
		fn(key, t)
	case map[string]any:
		for _, k := range sortedKeys(t, len(t)) {
			walkStrings(t[k], keyPath(key, k), fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, idx(key, i), fn)
		}
	}
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
