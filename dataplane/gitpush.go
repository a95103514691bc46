package dataplane

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A git push over HTTPS (POST …/git-receive-pack) that is held for approval
// and not released gets its refusal in git's own terms, because git shows
// no body for a failed push ("RPC failed; HTTP 403") and the person at the
// terminal would never learn the approval id: the answer is a receive-pack
// result that rejects each ref with the refusal's reason (git prints
// "! [remote rejected] main -> main (…)") and, when git asked for a side
// band, the whole message as "remote:" lines. Nothing reaches the upstream.

// gitPush is what a held push asked to update, read from its body's
// commands (pkt-lines "OLD NEW REF[\0CAPABILITIES]" up to the first flush).
type gitPush struct {
	refs     []string
	sideband bool // side-band-64k or side-band: messages go on band 2
}

// maxGitRefs bounds the refs a push's answer names.
const maxGitRefs = 256

// parseGitPush reads the commands at the start of a receive-pack request
// body; ok is false when r is no git push or the body is not one.
func parseGitPush(r *http.Request, body []byte) (*gitPush, bool) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-receive-pack") ||
		r.Header.Get("Content-Type") != "application/x-git-receive-pack-request" {
		return nil, false
	}
	g := &gitPush{}
	for len(body) >= 4 && len(g.refs) < maxGitRefs {
		n, err := strconv.ParseUint(string(body[:4]), 16, 16)
		if err != nil || n == 1 || n == 2 || n == 3 || int(n) > len(body) {
			return nil, false
		}
		if n == 0 {
			break // flush: the commands end, the pack follows
		}
		line := body[4:n]
		body = body[n:]
		cmd, caps, _ := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte{0})
		f := strings.Fields(string(cmd))
		if len(f) != 3 || !gitRefName(f[2]) {
			return nil, false
		}
		g.refs = append(g.refs, f[2])
		for _, c := range strings.Fields(string(caps)) {
			g.sideband = g.sideband || c == "side-band-64k" || c == "side-band"
		}
	}
	return g, len(g.refs) > 0
}

// gitRefName reports a ref name the answer may quote: under refs/, at most
// maxGitRefLen bytes of printable ASCII (git's check-ref-format forbids
// control characters and spaces anyway), so every answer line fits a
// pkt-line.
func gitRefName(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || len(ref) > maxGitRefLen {
		return false
	}
	for i := 0; i < len(ref); i++ {
		if ref[i] <= ' ' || ref[i] >= 0x7f {
			return false
		}
	}
	return true
}

// maxGitRefLen bounds a ref name the answer quotes.
const maxGitRefLen = 1024

// maxPktPayload is the most a pkt-line carries (65520 bytes in all).
const maxPktPayload = 65516

// pktLine frames payload as one git pkt-line; a longer payload is cut (the
// callers' lines are bounded well below).
func pktLine(payload string) string {
	if len(payload) > maxPktPayload {
		payload = payload[:maxPktPayload]
	}
	return fmt.Sprintf("%04x%s", len(payload)+4, payload)
}

// writeGitRefusal answers a held push with git's report-status: every ref
// rejected with ref's reason and approval id, and the message on the side
// band for git to print.
func writeGitRefusal(w http.ResponseWriter, ref Refusal, g *gitPush) {
	why := string(ref.Reason)
	if ref.ApprovalID != "" {
		why += " " + ref.ApprovalID
	}
	var report strings.Builder
	report.WriteString(pktLine("unpack ok\n"))
	for _, r := range g.refs {
		report.WriteString(pktLine("ng " + r + " " + why + "\n"))
	}
	report.WriteString("0000")
	var out strings.Builder
	if g.sideband {
		for _, line := range gitMessage(ref) {
			out.WriteString(pktLine("\x02" + line + "\n"))
		}
		rep := report.String()
		for len(rep) > 0 { // band 1 carries the report, in packets of at most 65515 bytes and the band's
			n := min(len(rep), maxPktPayload-1)
			out.WriteString(pktLine("\x01" + rep[:n]))
			rep = rep[n:]
		}
		out.WriteString("0000")
	} else {
		out.WriteString(report.String())
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-git-receive-pack-result")
	h.Set("Cache-Control", "no-store")
	ref.header(h, out.Len())
	h.Set("Content-Type", "application/x-git-receive-pack-result") // header() set the envelope's
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(out.String()))
}

// gitMessage is the refusal as git prints it after "remote: ": the message,
// the approval to decide, and what to do next; one line each, printable
// ASCII only (git writes them to a terminal as they are: no escape
// sequence and no bidirectional control may come through from the request).
func gitMessage(ref Refusal) []string {
	lines := []string{"Aileron: " + ref.Message}
	if ref.ApprovalID != "" {
		lines = append(lines, "Aileron: approval "+ref.ApprovalID+": approve it (aileron approvals approve "+ref.ApprovalID+
			", or the approvals page), then push again")
	}
	if ref.ReviewURL != "" {
		lines = append(lines, "Aileron: "+ref.ReviewURL)
	}
	for i, l := range lines {
		b := []byte(HeaderLine(l))
		for j, c := range b {
			if c < 0x20 || c > 0x7e {
				b[j] = '?'
			}
		}
		lines[i] = string(b)
	}
	return lines
}
