package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestExtract(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	body := `{"to":"a@b.c","n":1.50,"ok":true,"nil":null,"user":{"name":"ann","id":7},
		"items":[{"id":"x"},{"id":"y"}],"long":"` + long + `","big":{"k":"` + strings.Repeat("v", 300) + `"}}`
	path := map[string]string{"id": "42"}
	query := "q=is%3Aopen&q=second&token=secret&bad=%zz"
	for _, c := range []struct {
		name  string
		field Field
		want  any // nil: omitted
	}{
		{"path keep", Field{"id", "path.id", RedactKeep}, "42"},
		{"path hash", Field{"id", "path.id", RedactHash}, sha("42")},
		{"path drop", Field{"id", "path.id", RedactDrop}, true},
		{"path missing", Field{"x", "path.nope", RedactKeep}, nil},
		{"query first value", Field{"q", "query.q", RedactKeep}, "is:open"},
		{"query hash", Field{"q", "query.q", RedactHash}, sha("is:open")},
		{"query drop", Field{"t", "query.token", RedactDrop}, true},
		{"query missing", Field{"x", "query.nope", RedactKeep}, nil},
		{"body string", Field{"to", "body.to", RedactKeep}, "a@b.c"},
		{"body number as written", Field{"n", "body.n", RedactKeep}, json.Number("1.50")},
		{"body bool", Field{"ok", "body.ok", RedactKeep}, true},
		{"body null is present", Field{"nil", "body.nil", RedactDrop}, true},
		{"body nested", Field{"u", "body.user.name", RedactKeep}, "ann"},
		{"body array index", Field{"i", "body.items[1].id", RedactKeep}, "y"},
		{"body index out of range", Field{"i", "body.items[2].id", RedactKeep}, nil},
		{"body index on object", Field{"i", "body.user[0]", RedactKeep}, nil},
		{"body small object kept", Field{"u", "body.user", RedactKeep}, json.RawMessage(`{"id":7,"name":"ann"}`)},
		{"body object hash is canonical", Field{"u", "body.user", RedactHash}, sha(`{"id":7,"name":"ann"}`)},
		{"body number hash", Field{"n", "body.n", RedactHash}, sha("1.50")},
		{"body long string cut at rune", Field{"l", "body.long", RedactKeep}, strings.Repeat("é", 128)},
		{"body big object cut", Field{"b", "body.big", RedactKeep}, (`{"k":"` + strings.Repeat("v", 300))[:MaxKeptBytes]},
		{"body missing", Field{"x", "body.user.nope", RedactKeep}, nil},
		{"body path through scalar", Field{"x", "body.to.x", RedactKeep}, nil},
		{"unknown redact drops", Field{"to", "body.to", "show"}, true},
		{"bad source", Field{"x", "header.authorization", RedactKeep}, nil},
		{"no name", Field{"", "body.to", RedactKeep}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Extract([]Field{c.field}, path, query, []byte(body))
			if c.want == nil {
				if got != nil {
					t.Fatalf("got %v, want nothing", got)
				}
				return
			}
			if len(got) != 1 || !reflect.DeepEqual(got[c.field.Name], c.want) {
				t.Fatalf("got %#v, want {%q: %#v}", got, c.field.Name, c.want)
			}
		})
	}
}

func TestExtractNotJSONBody(t *testing.T) {
	fields := []Field{{"to", "body.to", RedactKeep}, {"id", "path.id", RedactKeep}}
	got := Extract(fields, map[string]string{"id": "1"}, "", []byte("to=a@b.c"))
	if want := map[string]any{"id": "1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("body.a.b[0]", "keep", "q=1", []byte(`{"a":{"b":[1]}}`))
	f.Add("body.[0][1]", "hash", "", []byte(`[[1,2]]`))
	f.Add("query.q", "drop", "q=%zz&q=2", []byte(nil))
	f.Add("body.a[", "keep", "", []byte(`{"a":[1]}`))
	f.Fuzz(func(t *testing.T, source, mode, query string, body []byte) {
		got := Extract([]Field{{Name: "f", Source: source, Redact: mode}}, map[string]string{"p": "v"}, query, body)
		for k, v := range got {
			if k != "f" {
				t.Fatalf("returned unnamed key %q", k)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("value %#v does not marshal: %v", v, err)
			}
			if s, ok := v.(string); ok && len(s) > MaxKeptBytes && !strings.HasPrefix(s, "sha256:") {
				t.Fatalf("kept %d bytes", len(s))
			}
		}
	})
}

// TestExtractFound: values a caller found in a body (by the path of each
// body source) are redacted as Extract redacts them, and a path the caller
// did not find is absent.
func TestExtractFound(t *testing.T) {
	fields := []Field{
		{Name: "to", Source: "body.to", Redact: RedactHash},
		{Name: "id", Source: "body.items[1].id", Redact: RedactKeep},
		{Name: "gone", Source: "body.cut", Redact: RedactKeep},
		{Name: "q", Source: "query.q", Redact: RedactKeep},
	}
	if got := BodyPaths(fields); !reflect.DeepEqual(got, []string{"to", "items[1].id", "cut"}) {
		t.Fatalf("BodyPaths = %q", got)
	}
	got := ExtractFound(fields, nil, "q=1", map[string]any{"to": "a@b.c", "items[1].id": json.Number("7")})
	want := map[string]any{"to": sha("a@b.c"), "id": json.Number("7"), "q": "1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ExtractFound = %v, want %v", got, want)
	}
}
