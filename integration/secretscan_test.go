package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// secretRegistry holds every secret value a test handed to a daemon (or an
// OAuth token endpoint handed out), by a printable name. Tests add to it;
// runMain scans the run's outputs for it after m.Run. The zero value is
// ready to use.
type secretRegistry struct {
	mu      sync.Mutex
	secrets map[string]string // name -> value
}

// add registers value under name (names must not reveal the value).
func (r *secretRegistry) add(name, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	r.secrets[name] = value
}

// snapshot returns a copy of the registered secrets.
func (r *secretRegistry) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.secrets))
	for k, v := range r.secrets {
		out[k] = v
	}
	return out
}

// values returns the registered secret values.
func (r *secretRegistry) values() []string {
	var out []string
	for _, v := range r.snapshot() {
		out = append(out, v)
	}
	return out
}

// secretForms returns the forms of value an echo or a log could carry:
// raw, base64 (standard and URL alphabets, padded or not), and URL-encoded.
// Forms shorter than 8 bytes are left out (they would match by chance).
func secretForms(value string) map[string]string {
	forms := map[string]string{
		"raw":             value,
		"base64":          base64.StdEncoding.EncodeToString([]byte(value)),
		"base64-unpadded": base64.RawStdEncoding.EncodeToString([]byte(value)),
		"base64url":       base64.RawURLEncoding.EncodeToString([]byte(value)),
		"query-escaped":   url.QueryEscape(value),
		"path-escaped":    url.PathEscape(value),
	}
	for k, v := range forms {
		if len(v) < 8 {
			delete(forms, k)
		}
	}
	return forms
}

// transcript is a bounded record of everything the tests received from the
// proxy (response heads and bodies) and from the CLI (stdout, stderr). The
// zero value is ready to use.
type transcript struct {
	mu      sync.Mutex
	size    int
	entries []place
	dropped int
}

const (
	transcriptEntryLimit = 4 << 20
	transcriptLimit      = 256 << 20
)

// add records what arrived at where; h may be nil.
func (tr *transcript) add(where string, h http.Header, body []byte) {
	var b bytes.Buffer
	if h != nil {
		_ = h.Write(&b)
		b.WriteString("\r\n")
	}
	b.Write(body[:min(len(body), transcriptEntryLimit)])
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.size+b.Len() > transcriptLimit {
		tr.dropped++
		return
	}
	tr.size += b.Len()
	tr.entries = append(tr.entries, place{name: where, data: b.Bytes()})
}

func (tr *transcript) snapshot() ([]place, int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]place(nil), tr.entries...), tr.dropped
}

// place is one scanned text: a file or a recorded response.
type place struct {
	name string
	data []byte
}

// finding names a secret form found in a place, never the value.
type finding struct{ place, secret, form string }

func (f finding) String() string {
	return fmt.Sprintf("%s contains secret %q (%s form)", f.place, f.secret, f.form)
}

// scanPlaces reports every (place, secret, form) where a form of a secret
// occurs.
func scanPlaces(secrets map[string]string, places []place) []finding {
	names := make([]string, 0, len(secrets))
	for n := range secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []finding
	for _, p := range places {
		for _, n := range names {
			forms := secretForms(secrets[n])
			kinds := make([]string, 0, len(forms))
			for k := range forms {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				if bytes.Contains(p.data, []byte(forms[k])) {
					out = append(out, finding{place: p.name, secret: n, form: k})
					break
				}
			}
		}
	}
	return out
}

// isVaultFile reports whether rel (inside AILERON_HOME) is the encrypted
// vault or one of its temporary copies: the only files allowed to hold
// secrets, because they hold them encrypted.
func isVaultFile(rel string) bool {
	return strings.HasPrefix(filepath.Base(rel), "vault.age")
}

// homePlaces reads every regular file under home except the vault.
func homePlaces(home string) ([]place, error) {
	var out []place
	err := filepath.WalkDir(home, func(path string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		if isVaultFile(rel) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, place{name: "file " + path, data: raw})
		return nil
	})
	return out, err
}

// scanForSecrets asks every live daemon for `credential list --json` (so it
// is recorded), stops all daemons so their logs are complete, and scans
// their homes (logs included; not the vault) and the transcript for every
// registered secret. It reports to w and returns false on any finding.
func (s *suite) scanForSecrets(w io.Writer) bool {
	secrets, tokens := s.secrets.snapshot(), s.tokens.snapshot()
	if len(secrets)+len(tokens) == 0 {
		return true
	}
	s.daemonsMu.Lock()
	ds := append([]*daemon(nil), s.daemons...)
	s.daemonsMu.Unlock()
	for _, d := range ds {
		if !d.exited() {
			_, _, _ = d.run(context.Background(), "credential", "list", "--json")
		}
	}
	var places []place
	ok := true
	for _, d := range ds {
		_ = d.stop()
		ps, err := homePlaces(d.home)
		if err != nil {
			fmt.Fprintf(w, "integration: secret scan: cannot read %s: %v\n", d.home, err)
			ok = false
		}
		places = append(places, ps...)
	}
	homes := len(places)
	recorded, dropped := s.seen.snapshot()
	if dropped > 0 {
		fmt.Fprintf(w, "integration: secret scan: %d received responses exceeded the %d-byte record and were not scanned\n", dropped, transcriptLimit)
		ok = false
	}
	places = append(places, recorded...)
	found := append(scanPlaces(secrets, places), scanPlaces(tokens, places[:homes])...)
	for _, f := range found {
		fmt.Fprintf(w, "integration: secret scan: %s\n", f)
	}
	fmt.Fprintf(w, "integration: secret scan: %d secrets and %d session tokens, %d places (%d daemon homes, %d received responses/CLI outputs), %d findings\n",
		len(secrets), len(tokens), len(places), len(ds), len(recorded), len(found))
	return ok && len(found) == 0
}

// TestSecretScanFindsEveryForm proves the scanner that runs after the suite
// catches each encoded form, names the secret without printing it, and
// skips only the vault.
func TestSecretScanFindsEveryForm(t *testing.T) {
	const secret = "s3cr3t+/value=with&specials"
	forms := secretForms(secret)
	for _, want := range []string{"raw", "base64", "query-escaped", "base64url"} {
		t.Run(want, func(t *testing.T) {
			p := place{name: "planted", data: []byte("prefix " + forms[want] + " suffix")}
			got := scanPlaces(map[string]string{"planted secret": secret}, []place{p, {name: "clean", data: []byte("nothing here")}})
			if len(got) != 1 || got[0].place != "planted" || got[0].secret != "planted secret" {
				t.Fatalf("scan of the %s form found %v, want one finding in place planted", want, got)
			}
			if strings.Contains(got[0].String(), secret) {
				t.Errorf("finding text prints the secret: %s", got[0])
			}
		})
	}
	t.Run("vault_skipped_other_files_read", func(t *testing.T) {
		home := t.TempDir()
		for rel, body := range map[string]string{"vault/vault.age": secret, "logs/x.log": secret, "daemon.json": "{}"} {
			p := filepath.Join(home, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ps, err := homePlaces(home)
		if err != nil {
			t.Fatal(err)
		}
		got := scanPlaces(map[string]string{"s": secret}, ps)
		if len(got) != 1 || !strings.HasSuffix(got[0].place, filepath.Join("logs", "x.log")) {
			t.Errorf("findings %v, want exactly the log file (the vault is encrypted and skipped)", got)
		}
	})
}
