// Command agent is the demo's stand-in for an agent in a sandbox: a plain
// Go HTTP client that, like an SDK, sends the API key it finds in
// DEMO_API_KEY (in the demo, only Aileron's placeholder). It goes through
// HTTPS_PROXY and trusts SSL_CERT_FILE, as `aileron session env` sets
// them, like curl, Python or Node would. The demo uses it so that it needs
// nothing but Go.
//
//	agent METHOD URL [JSON-BODY]
//
// It prints what it sent and what came back; it exits 1 when no answer
// came.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 || len(os.Args) > 4 {
		fmt.Fprintln(os.Stderr, "usage: agent METHOD URL [JSON-BODY]")
		os.Exit(2)
	}
	method, url := os.Args[1], os.Args[2]
	var body io.Reader
	if len(os.Args) == 4 {
		body = strings.NewReader(os.Args[3])
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(2)
	}
	sent := "no key"
	if key := os.Getenv("DEMO_API_KEY"); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
		sent = "Authorization: Bearer " + key
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	fmt.Printf("  agent sends: %s %s  (%s)\n", method, url, sent)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		fmt.Println("  agent got no answer:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	fmt.Printf("  agent gets:  %s %s", resp.Status, b)
	if !strings.HasSuffix(string(b), "\n") {
		fmt.Println()
	}
}
