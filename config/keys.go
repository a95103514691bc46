package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/policy"
)

var durationType = reflect.TypeFor[time.Duration]()

// checkTree reports every key of tree (a parsed YAML document) that Config
// has no field for, naming the closest known key, and every duration given
// as a bare number (YAML's 5 would be 5 ns): a typo or a missing unit must
// never silently leave a setting at its default. source names the file.
func checkTree(tree map[string]any, source string) []string {
	var probs []string
	walkTree(tree, reflect.TypeFor[Config](), "", source, &probs)
	sort.Strings(probs)
	return probs
}

func walkTree(v any, t reflect.Type, path, source string, probs *[]string) {
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return // a wrong type is the decoder's to report
		}
		fields := fieldsOf(t)
		for k, sub := range m {
			key := join(path, k)
			ft, known := fields[k]
			if !known {
				*probs = append(*probs, unknownKey(source, key, path, fields))
				continue
			}
			walkTree(sub, ft, key, source, probs)
		}
	case reflect.Slice:
		if list, ok := v.([]any); ok && t.Elem().Kind() == reflect.Struct {
			for i, e := range list {
				walkTree(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), source, probs)
			}
		}
	default:
		if p := checkValue(t, v); p != "" {
			*probs = append(*probs, fmt.Sprintf("config: %s: %s: %s", source, path, p))
		}
	}
}

// checkValue reports a scalar of a file or variable that the field of
// type t cannot take, saying what to write instead ("" when fine, or when
// the decoder reports it).
func checkValue(t reflect.Type, v any) string {
	switch {
	case t == durationType:
		switch x := v.(type) {
		case int, int64, uint64, float64:
			if fmt.Sprint(v) == "0" {
				return "0 has no unit (and durations here must be positive); write one such as \"30s\" or \"5m\""
			}
			return fmt.Sprintf("%v has no unit; write a duration such as \"%vs\" or \"%vm\"", v, v, v)
		case string:
			if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return fmt.Sprintf("%q has no unit; write a duration such as \"%ss\" or \"%sm\"", x, strings.TrimSpace(x), strings.TrimSpace(x))
			}
			if _, err := time.ParseDuration(strings.TrimSpace(x)); err != nil {
				return fmt.Sprintf("%q is not a duration; write one with a unit, such as \"30s\", \"5m\" or \"1h\"", x)
			}
		}
	case t.Kind() == reflect.Bool:
		if x, ok := v.(string); ok {
			if _, err := strconv.ParseBool(strings.TrimSpace(x)); err != nil {
				return fmt.Sprintf("%q is not a boolean; write true or false", x)
			}
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		switch x := v.(type) {
		case string:
			if _, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err != nil {
				return fmt.Sprintf("%q is not a whole number; write digits only (sizes are in bytes: 8388608 for 8 MiB)", x)
			}
		case float64:
			if x != math.Trunc(x) {
				return fmt.Sprintf("%v is not a whole number; write digits only (it would be cut to %d)", x, int64(x))
			}
		}
	}
	return ""
}

// checkEnvKey reports an AILERON_* variable that is meant as configuration
// (it nests with "__", or its first word is a config section) but names no
// key Config has. Other AILERON_* variables (AILERON_API_URL,
// AILERON_SESSION_ID: what a sandbox receives) are not configuration.
func checkEnvKey(name, key string) string {
	t := reflect.TypeFor[Config]()
	fields := fieldsOf(t)
	first, _, nested := strings.Cut(key, ".")
	if _, section := fields[strings.SplitN(first, "_", 2)[0]]; !nested && !section {
		return ""
	}
	if known(t, key) {
		return ""
	}
	msg := fmt.Sprintf("config: environment: %s names no configuration key (%q)", name, key)
	for i := range len(key) {
		if key[i] == '_' && known(t, key[:i]+"."+key[i+1:]) {
			fixed := "AILERON_" + strings.ToUpper(strings.ReplaceAll(key[:i]+"."+key[i+1:], ".", "__"))
			return msg + fmt.Sprintf("; did you mean %s? (a double underscore nests)", fixed)
		}
	}
	parent, last := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parent, last = key[:i], key[i+1:]
	}
	if pt, ok := typeAt(t, parent); ok && pt.Kind() == reflect.Struct {
		names := sortedNames(fieldsOf(pt))
		if near, ok := policy.Closest(last, names); ok {
			return msg + fmt.Sprintf("; did you mean AILERON_%s?", strings.ToUpper(strings.ReplaceAll(join(parent, near), ".", "__")))
		}
	}
	return msg + "; `aileron config defaults` lists the keys (AILERON_PROXY__LISTEN sets proxy.listen)"
}

// known reports whether key (dotted) names a setting: a field of Config,
// or anything below a map or list field.
func known(t reflect.Type, key string) bool {
	_, ok := typeAt(t, key)
	return ok
}

// typeAt returns the type of the setting at key, walking struct fields;
// a key below a map or list field is that field's.
func typeAt(t reflect.Type, key string) (reflect.Type, bool) {
	if key == "" {
		return t, true
	}
	for _, seg := range strings.Split(key, ".") {
		if t.Kind() != reflect.Struct {
			return t, true
		}
		ft, ok := fieldsOf(t)[seg]
		if !ok {
			return nil, false
		}
		t = ft
	}
	return t, true
}

func sortedNames(fields map[string]reflect.Type) []string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unknownKey describes key, unknown under parent whose fields are given.
func unknownKey(source, key, parent string, fields map[string]reflect.Type) string {
	names := sortedNames(fields)
	last := key[strings.LastIndexByte(key, '.')+1:]
	msg := fmt.Sprintf("config: %s: unknown key %q", source, key)
	if near, ok := policy.Closest(last, names); ok {
		msg += fmt.Sprintf("; did you mean %q?", join(parent, near))
	}
	where := "at the top level"
	if parent != "" {
		where = "under " + parent
	}
	return msg + fmt.Sprintf(" (known %s: %s; `aileron config defaults` shows them all)", where, strings.Join(names, ", "))
}

// fieldsOf maps the koanf names of struct type t to their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if name := f.Tag.Get("koanf"); name != "" {
			out[name] = f.Type
		}
	}
	return out
}

func join(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// checkEnvValue reports what is wrong with the value of AILERON_* variable
// name (key, of type t): a section or list given a plain value, a bad
// scalar, or unknown keys inside a list of objects.
func checkEnvValue(name, key string, t reflect.Type, v any) []string {
	_, scalar := v.(string)
	switch {
	case t.Kind() == reflect.Struct:
		return []string{fmt.Sprintf("config: environment: %s sets the section %s, which holds keys, not a value; "+
			"set one of its keys, e.g. AILERON_%s__%s", name, key, strings.ToUpper(strings.ReplaceAll(key, ".", "__")),
			strings.ToUpper(sortedNames(fieldsOf(t))[0]))}
	case t.Kind() == reflect.Slice && scalar:
		return []string{fmt.Sprintf("config: environment: %s (%s) is a list: write it in brackets, e.g. %s='[a, b]'", name, key, name)}
	case scalar:
		if p := checkValue(t, v); p != "" {
			return []string{fmt.Sprintf("config: environment: %s (%s): %s", name, key, p)}
		}
		return nil
	}
	var probs []string
	walkTree(v, t, key, "environment: "+name, &probs)
	return probs
}
