package action

import (
	"fmt"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// checkOutputRefs refuses every ${STEP.FIELD…} in a step's inputs that
// names a field the output_schema of STEP's operation does not list
// (policy.OutputHasField). ops[i] is step i's resolved operation (nil when
// it did not resolve); a step whose operation declares no output_schema,
// and ${STEP} alone, are not checked.
func checkOutputRefs(file string, m *Manifest, ops []*policy.OperationSpec) []error {
	ids := map[string]int{}
	for i, s := range m.Steps {
		if _, dup := ids[s.ID]; !dup {
			ids[s.ID] = i
		}
	}
	var errs []error
	for i, s := range m.Steps {
		walkStrings(s.Inputs, idx("execute", i)+".inputs", func(key, str string) {
			segs, err := scanTemplate(str)
			if err != nil {
				return // reported by Validate
			}
			for _, sg := range segs {
				parts := strings.Split(sg.ref, ".")
				j, ok := ids[parts[0]]
				if sg.ref == "" || parts[0] == argsRoot || len(parts) < 2 || !ok || j >= i || ops[j] == nil {
					continue
				}
				if policy.OutputHasField(ops[j].OutputSchema, parts[1:]) {
					continue
				}
				errs = append(errs, &ValidationError{File: file, Key: key, Rule: ruleOutputField, Message: fmt.Sprintf(
					"action %s, step %s: ${%s} names field %s of step %s, which the output_schema of operation %s does not list; use a field under its properties, or fix the schema",
					quote(m.Name), quote(s.ID), sg.ref, quote(strings.Join(parts[1:], ".")), quote(parts[0]), quote(ops[j].Name))})
			}
		})
	}
	return errs
}
