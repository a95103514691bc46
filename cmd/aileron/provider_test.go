package main

import (
	"bytes"
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
