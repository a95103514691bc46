package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProviderAddRefusesBadInput checks the refusals that come before the
// daemon is asked anything: a key on the command line, a wrong provider,
// flags of another provider, and a key of the wrong kind. Each is a usage
// error (exit 2) that says what to do, and none echoes the key.
func TestProviderAddRefusesBadInput(t *testing.T) {
	t.Setenv("AILERON_HOME", t.TempDir())
	const key = "sk-ant-api03-SECRETsecret"
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"provider", "add", "anthropic", "--key", key}, "", "never taken on the command line"},
		{[]string{"provider", "add", "anthropic", "--key=" + key}, "", "never taken on the command line"},
		{[]string{"provider", "add", "anthropic", "--api-key", key}, "", "never taken on the command line"},
		{[]string{"provider", "add", "anthropic", key}, "", "never taken on the command line"},
		{[]string{"provider", "add", "gemini", "AIzaSECRETsecret"}, "", "never taken on the command line"},
		{[]string{"provider", "add", "anthropic", "extra"}, key, "want one provider"},
		{[]string{"provider", "add"}, key, "want one provider"},
		{[]string{"provider", "add", "mistral"}, key, `unknown provider "mistral"`},
		{[]string{"provider", "add", "anthropic"}, "", "no key on stdin"},
		{[]string{"provider", "add", "anthropic"}, " \n", "no key on stdin"},
		{[]string{"provider", "add", "anthropic"}, "sk-ant-oat01-SECRET", "add --subscription"},
		{[]string{"provider", "add", "anthropic", "--subscription"}, key, "takes a Claude Code token"},
		{[]string{"provider", "add", "openai", "--subscription"}, key, "--subscription is for anthropic"},
		{[]string{"provider", "add", "openai", "--host", "x.example.com"}, key, "are for openai-compatible"},
		{[]string{"provider", "add", "openai-compatible", "--host", "llm.example.com"}, key, "--name"},
		{[]string{"provider", "add", "openai-compatible", "--name", "vllm"}, key, "--host is required"},
		{[]string{"provider", "add", "openai-compatible", "--name", "vllm", "--host", "https://llm.example.com/v1"}, key, "--host"},
		{[]string{"provider", "frob"}, "", "unknown"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, strings.NewReader(c.stdin), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errb.String(), c.want)
		}
		if strings.Contains(errb.String()+out.String(), "SECRET") {
			t.Errorf("%v: the output holds the key: %q", c.args, errb.String())
		}
	}
}

// TestProviderAddTakesFlagValues: the values of --key-file, --name, --host
// and --env are not keys on the command line, whatever they start with;
// the command goes on to the daemon (absent here).
func TestProviderAddTakesFlagValues(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AILERON_HOME", filepath.Join(dir, "home"))
	t.Chdir(dir)
	if err := os.WriteFile("sk-ant.key", []byte("sk-ant-api03-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"provider", "add", "anthropic", "--key-file", "sk-ant.key"},
		{"provider", "add", "anthropic", "--key-file=sk-ant.key"},
		{"provider", "add", "openai-compatible", "--name", "sk-llm", "--host", "sk-llm.example.com", "--env", "SK_LLM_KEY", "--key-file", "sk-ant.key"},
	} {
		var out, errb bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "is `aileron daemon` running?") {
			t.Errorf("%v: exit %d, stderr %q; want it to reach for the daemon", args, code, errb.String())
		}
	}
}

// TestProviderAddEmptyStdin: /dev/null is a character device but not a
// terminal: it reads as an empty key, refused as empty.
func TestProviderAddEmptyStdin(t *testing.T) {
	t.Setenv("AILERON_HOME", t.TempDir())
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var out, errb bytes.Buffer
	code := run([]string{"provider", "add", "anthropic"}, null, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "no key on stdin") {
		t.Errorf("exit %d, stderr %q; want exit 2 saying there is no key on stdin", code, errb.String())
	}
}
