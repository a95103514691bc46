package manifest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

func spec(hosts []string, kind string) *policy.Spec {
	return &policy.Spec{Connector: policy.Connector{FQN: "github://acme/x", Version: "1.0.0"},
		Tools: []policy.Tool{{Name: "t", Operations: []policy.OperationSpec{{Name: "op", Hosts: hosts, Credential: policy.Credential{Kind: kind}}}}}}
}

func TestReach(t *testing.T) {
	got := Reach(spec([]string{"B.example.com", "a.example.com:8443", "b.example.com:443"}, "bearer"))
	want := Grants{Hosts: []string{"a.example.com:8443", "b.example.com:443"}, CredentialKinds: []string{"bearer"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Reach = %+v, want %+v", got, want)
	}
}

// TestCheckFailsClosed: a host entry that does not parse (ParseSpec never
// lets one through, but Check does not rely on it) is an excess, never
// skipped.
func TestCheckFailsClosed(t *testing.T) {
	m, err := Parse("m.toml", []byte(head+"[capabilities.network]\nhosts = [\"a.example.com:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(spec([]string{"a.example.com"}, "")); err != nil {
		t.Fatalf("Check refused a matching spec: %v", err)
	}
	err = m.Check(spec([]string{"a.example.com", "*.example.com"}, ""))
	if !errors.Is(err, ErrExceedsManifest) || !strings.Contains(err.Error(), `host "*.example.com"`) {
		t.Errorf("Check = %v, want the unparsable host refused", err)
	}
}
