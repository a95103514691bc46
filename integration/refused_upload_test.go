package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedUploadReachesTheClient: a POST refused on its method, host
// and path alone is answered before its body has all arrived. curl still
// receives the refusal, whole, over HTTP/2 and HTTP/1.1, at every body
// size: the proxy reads what is left of a body it did not need (up to a
// bound) before it ends the answer. Over HTTP/2 a stream otherwise ends
// with RST_STREAM(NO_ERROR) while curl is still uploading, which curl 7.88
// reports as "Stream error in the HTTP/2 framing layer" (exit 92) in place
// of the refusal.
func TestRefusedUploadReachesTheClient(t *testing.T) {
	s := theSuite.mainDaemon(t).newSession(t, "--name", "refused-upload")
	const target = "https://gmail.googleapis.com/gmail/v1/users/me/not-an-operation"
	for _, size := range []int{1 << 10, 48 << 10, 200 << 10} {
		file := filepath.Join(t.TempDir(), "body")
		if err := os.WriteFile(file, bytes.Repeat([]byte("a"), size), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, proto := range []string{"--http2", "--http1.1"} {
			t.Run(fmt.Sprintf("%s_%dKiB", strings.TrimPrefix(proto, "--"), size>>10), func(t *testing.T) {
				for i := range 4 { // the race is the body's against the answer: run it a few times
					out, errOut, err := runWithEnv(t, s, "curl", "-sS", "--max-time", "60", proto, "-X", "POST",
						"-H", "Content-Type: application/octet-stream", "--data-binary", "@"+file,
						"-w", "\n%{http_code} %{http_version}", target)
					if err != nil {
						t.Fatalf("try %d: curl: %v\n%s%s", i, err, out, errOut)
					}
					cut := strings.LastIndexByte(out, '\n')
					body, tail := out[:max(cut, 0)], out[cut+1:]
					var env struct {
						Error struct {
							Reason string `json:"reason"`
						} `json:"error"`
					}
					want := "403 2"
					if proto == "--http1.1" {
						want = "403 1.1"
					}
					if jerr := json.Unmarshal([]byte(body), &env); jerr != nil || tail != want || env.Error.Reason != "no_matching_operation" {
						t.Fatalf("try %d: got %q %s; want %s and the no_matching_operation envelope", i, tail, body, want)
					}
				}
			})
		}
	}
}
