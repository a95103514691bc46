package integration

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"
)

// TestKeepAliveEveryRequestDecided sends several requests over one proxy
// connection and checks each was decided on its own: allowed, denied,
// allowed again.
func TestKeepAliveEveryRequestDecided(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "keepalive")
	up := theSuite.up
	op := gmailMessageGet(t)
	host := hostOnly(authority(op.Hosts[0]))
	steps := []struct {
		path   string
		status int
	}{
		{concretePath(op.Path, "ka-1"), http.StatusOK},
		{"/gmail/v1/users/me/aileron-denied-ka", http.StatusForbidden},
		{concretePath(op.Path, "ka-2"), http.StatusOK},
	}

	t.Run("go_client_reuses_connection", func(t *testing.T) {
		c := goClient(t, s)
		audit := map[string]bool{}
		for i, st := range steps {
			var reused bool
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
			req, err := http.NewRequest(http.MethodGet, urlFor(op.Hosts[0], st.path+"?via=go"), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != st.status {
				t.Errorf("request %d %s: status %d, want %d; %s", i, st.path, resp.StatusCode, st.status, trunc(body))
			}
			if i > 0 && !reused {
				t.Errorf("request %d did not reuse the proxy connection", i)
			}
			id := resp.Header.Get("X-Aileron-Audit-Id")
			if st.status == http.StatusOK && (id == "" || audit[id]) {
				t.Errorf("request %d: audit id %q missing or reused", i, id)
			}
			audit[id] = true
		}
	})
	t.Run("raw_http11_three_requests_one_tunnel", func(t *testing.T) {
		before := map[string]int{}
		for _, st := range steps {
			before[st.path] = up.Hits(host, st.path)
		}
		tun, o := rawConnect(t, d.ProxyAddr, authority(op.Hosts[0]), s.auth(t))
		if tun == nil {
			t.Fatalf("CONNECT: %s", o)
		}
		defer tun.Close()
		tc := tls.Client(tun, &tls.Config{ServerName: host, RootCAs: s.caPool(t), NextProtos: []string{"http/1.1"}})
		_ = tc.SetDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReader(tc)
		for i, st := range steps {
			if _, err := io.WriteString(tc, "GET "+st.path+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
				t.Fatalf("write request %d: %v", i, err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("read response %d (the proxy closed a keep-alive tunnel?): %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != st.status {
				t.Errorf("request %d %s: status %d, want %d; %s", i, st.path, resp.StatusCode, st.status, trunc(body))
			}
		}
		for _, st := range steps {
			want := 0
			if st.status == http.StatusOK {
				want = 1
			}
			if n := up.Hits(host, st.path) - before[st.path]; n != want {
				t.Errorf("upstream saw %s %d time(s), want %d", st.path, n, want)
			}
		}
	})
}
