package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/notify"
	"github.com/aileronhq/aileron/state"
)

// openNotify reads approval.webhooks' secrets and starts the notifier the
// recorder hands approval events to; with no webhook there is none. A
// secret file group or others may read is refused, as every secret file
// is (state.CheckPrivateFile).
func (d *daemon) openNotify() error {
	if len(d.cfg.Approval.Webhooks) == 0 {
		return nil
	}
	n := &notify.Notifier{Log: d.log}
	for i, h := range d.cfg.Approval.Webhooks {
		if err := state.CheckPrivateFile(h.SecretFile, fmt.Sprintf("approval.webhooks[%d].secret_file", i)); err != nil {
			return err
		}
		secret, err := os.ReadFile(h.SecretFile)
		if err != nil {
			return fmt.Errorf("approval.webhooks[%d].secret_file: %w", i, err)
		}
		if secret = bytes.TrimSpace(secret); len(secret) == 0 {
			return fmt.Errorf("approval.webhooks[%d].secret_file: %s is empty; write a secret into it: (umask 077; openssl rand -hex 32 > %s)", i, h.SecretFile, h.SecretFile)
		}
		n.Hooks = append(n.Hooks, notify.Hook{URL: h.URL, Secret: secret})
	}
	n.Start()
	d.notifier = n
	d.rec.notify = n.Notify
	d.rec.reviewURL = func(id string) string {
		if d.approval == nil || d.approval.ReviewURL == nil {
			return ""
		}
		return d.approval.ReviewURL(id)
	}
	return nil
}

// approvalNote is the webhook event of an approval event's details.
func approvalNote(name audit.EventName, d map[string]string, reviewURL func(string) string) notify.Event {
	ev := notify.Event{Event: string(name), ApprovalID: d["approval_id"], Session: d["session"], Connector: d["connector"],
		Operation: d["operation"], ProposalID: d["proposal_id"], Method: d["method"], Host: d["host"], Path: d["path"], DecidedBy: d["decided_by"], Reason: d["reason"]}
	if reviewURL != nil && name == audit.EventApprovalRequested {
		ev.ReviewURL = reviewURL(ev.ApprovalID)
	}
	return ev
}
