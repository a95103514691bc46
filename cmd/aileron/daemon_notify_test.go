package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/state"
)

// TestWebhookSecretMustBePrivate: a webhook secret file group or others
// can read (what `openssl rand -hex 32 > hook.secret` makes under the
// usual umask) stops the daemon with the chmod to run, as every other
// secret file does; one only its owner can read is taken.
func TestWebhookSecretMustBePrivate(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o644, false}, {0o640, false}, {0o604, false}, {0o600, true}, {0o400, true}} {
		secret := filepath.Join(t.TempDir(), "hook.secret")
		if err := os.WriteFile(secret, []byte("0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(secret, c.mode); err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{}
		cfg.Approval.Webhooks = []config.Webhook{{URL: "https://chat.example/hook", SecretFile: secret}}
		d := &daemon{cfg: cfg, rec: &recorder{}}
		err := d.openNotify()
		if d.notifier != nil {
			d.notifier.Close()
		}
		switch {
		case c.ok && err != nil:
			t.Errorf("mode %04o: %v, want the secret taken", c.mode, err)
		case !c.ok && (!errors.Is(err, state.ErrInsecureFile) || !strings.Contains(err.Error(), "chmod 600 "+secret) ||
			!strings.Contains(err.Error(), "approval.webhooks[0].secret_file")):
			t.Errorf("mode %04o: %v, want a refusal naming approval.webhooks[0].secret_file and `chmod 600 %s`", c.mode, err, secret)
		}
	}
}

// TestApprovalNoteNamesProposal: the webhook event of an unknown request's
// approval (ask mode) names its proposal, as the audit event does.
func TestApprovalNoteNamesProposal(t *testing.T) {
	ev := approvalNote(audit.EventApprovalRequested, map[string]string{"approval_id": "ap_1", "proposal_id": "pr_1", "method": "GET"}, nil)
	if ev.ApprovalID != "ap_1" || ev.ProposalID != "pr_1" || ev.Operation != "" || ev.Method != "GET" {
		t.Errorf("event %+v; want approval ap_1 naming proposal pr_1", ev)
	}
}
