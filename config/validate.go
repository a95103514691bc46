package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// Validate checks every value. The error names the key, the bad value and
// the fix; all problems are reported at once, one per line.
func (c *Config) Validate() error {
	var probs []string
	add := func(key, format string, args ...any) {
		probs = append(probs, fmt.Sprintf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, err := netip.ParseAddrPort(c.Proxy.Listen); err != nil {
		if _, _, err2 := net.SplitHostPort(c.Proxy.Listen); err2 != nil {
			add("proxy.listen", "%q is not host:port; write e.g. \"127.0.0.1:9080\"", c.Proxy.Listen)
		}
	}
	if c.Proxy.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Proxy.Advertise); err != nil {
			add("proxy.advertise", "%q is not host:port; write e.g. \"10.0.0.5:9080\"", c.Proxy.Advertise)
		}
	}
	for i, r := range c.Proxy.Passthrough {
		key := fmt.Sprintf("proxy.passthrough[%d]", i)
		if err := checkGlob(r.Host); err != "" {
			add(key+".host", "%q %s", r.Host, err)
		}
		if r.Port < 1 || r.Port > 65535 {
			add(key+".port", "%d is not a TCP port (1-65535); passthrough rules name one port, e.g. 443", r.Port)
		}
	}
	for _, d := range []struct {
		key string
		v   int64
	}{
		{"proxy.handshake_timeout", int64(c.Proxy.HandshakeTimeout)},
		{"proxy.read_header_timeout", int64(c.Proxy.ReadHeaderTimeout)},
		{"proxy.idle_timeout", int64(c.Proxy.IdleTimeout)},
		{"proxy.tunnel_idle_timeout", int64(c.Proxy.TunnelIdleTimeout)},
		{"proxy.body_idle_timeout", int64(c.Proxy.BodyIdleTimeout)},
		{"proxy.shutdown_timeout", int64(c.Proxy.ShutdownTimeout)},
		{"upstream.dial_timeout", int64(c.Upstream.DialTimeout)},
		{"upstream.tls_handshake_timeout", int64(c.Upstream.TLSHandshakeTimeout)},
		{"upstream.response_header_timeout", int64(c.Upstream.ResponseHeaderTimeout)},
		{"sessions.default_ttl", int64(c.Sessions.DefaultTTL)},
		{"audit.sync_interval", int64(c.Audit.SyncInterval)},
		{"audit.checkpoint_interval", int64(c.Audit.CheckpointInterval)},
		{"approval.hold", int64(c.Approval.Hold)},
		{"approval.ttl", int64(c.Approval.TTL)},
	} {
		if d.v <= 0 {
			add(d.key, "must be a positive duration such as \"10s\" or \"5m\"")
		}
	}
	if c.Proxy.BodyMinRate < 0 || c.Proxy.BodyMinRate > 1<<30 {
		add("proxy.body_min_rate", "%d is out of range; use 0 (no rate check)..1073741824 bytes a second", c.Proxy.BodyMinRate)
	}
	if c.Proxy.MaxHeaderBytes < 4096 || c.Proxy.MaxHeaderBytes > 1<<20 {
		add("proxy.max_header_bytes", "%d is out of range; use 4096..1048576", c.Proxy.MaxHeaderBytes)
	}
	if c.Proxy.MaxCheckedBody < 1 || c.Proxy.MaxCheckedBody > 16<<20 {
		add("proxy.max_checked_body", "%d is out of range; use 1..16777216 bytes (default 1048576)", c.Proxy.MaxCheckedBody)
	}
	c.validateWeb(add)
	c.validateWebhooks(add)
	if c.Admin.MetricsListen != "" {
		if _, err := netip.ParseAddrPort(c.Admin.MetricsListen); err != nil {
			add("admin.metrics_listen", "%q is not an ip:port such as \"127.0.0.1:9092\" (\"0.0.0.0:9092\" for a scraper in another container), or \"\" for the admin socket only", c.Admin.MetricsListen)
		}
	}
	c.validateApprovalSizes(add)
	if d := c.Actions.DefaultTimeout; d < time.Second || d > time.Hour {
		add("actions.default_timeout", "%s is out of range; use a duration between \"1s\" and \"1h\" (default \"2m\")", d)
	}
	if c.Approval.MaxPendingPerSession < 1 || c.Approval.MaxPendingPerSession > 10000 {
		add("approval.max_pending_per_session", "%d is out of range; use 1..10000", c.Approval.MaxPendingPerSession)
	}
	if c.Audit.MaxFileBytes < 4096 {
		add("audit.max_file_bytes", "%d is too small; use at least 4096 (default 67108864)", c.Audit.MaxFileBytes)
	}
	if c.Audit.CheckpointEvery < 2 || c.Audit.CheckpointEvery > 1<<24 {
		add("audit.checkpoint_every", "%d is out of range; use 2..16777216 lines (default 5000)", c.Audit.CheckpointEvery)
	}
	for i, w := range c.Audit.Witnesses {
		u, err := url.Parse(w.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add(fmt.Sprintf("audit.witnesses[%d].url", i), "%q is not an http(s) URL such as \"https://witness.example:7380\"", w.URL)
		case u.User != nil || u.RawQuery != "":
			// it is logged and labels metrics: no place for a credential
			add(fmt.Sprintf("audit.witnesses[%d].url", i), "carries a user, password or query; a witness needs none, and the URL is logged and shown in metrics")
		}
		if strings.Count(w.Key, "+") < 2 {
			add(fmt.Sprintf("audit.witnesses[%d].key", i), "%q is not a witness key (name+hash+base64, as `aileron witness` prints it)", w.Key)
		}
	}
	probs = append(probs, c.validateUpstream()...)
	c.validateSources(add)
	for i, s := range c.Egress.AllowCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			probs = append(probs, fmt.Sprintf("config: egress.allow_cidrs[%d]: %q is not a CIDR; write e.g. \"10.20.0.0/16\" or \"192.0.2.7/32\"", i, s))
		}
	}
	if p, err := netip.ParsePrefix(c.Sandbox.LinkCIDR); err != nil || !p.Addr().Is4() || p.Bits() > 28 {
		add("sandbox.link_cidr", "%q is not an IPv4 CIDR of /28 or wider; write e.g. \"10.237.0.0/16\" (a range no network of this machine uses)", c.Sandbox.LinkCIDR)
	}
	if p, err := netip.ParsePrefix(c.Sandbox.LinkCIDR6); err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() > 48 {
		add("sandbox.link_cidr6", "%q is not an IPv6 CIDR of /48 or wider; write e.g. \"fd00:a11e:f00d::/48\"", c.Sandbox.LinkCIDR6)
	}
	s4, err4 := netip.ParsePrefix(c.Sandbox.SyntheticCIDR)
	if err4 != nil || !s4.Addr().Is4() || s4.Bits() > 30 {
		add("sandbox.synthetic_cidr", "%q is not an IPv4 CIDR of /30 or wider; write e.g. \"198.18.0.0/15\"", c.Sandbox.SyntheticCIDR)
	} else if l4, err := netip.ParsePrefix(c.Sandbox.LinkCIDR); err == nil && l4.Overlaps(s4) {
		add("sandbox.synthetic_cidr", "%s overlaps sandbox.link_cidr %s; pick ranges apart", s4, l4)
	}
	s6, err6 := netip.ParsePrefix(c.Sandbox.SyntheticCIDR6)
	if err6 != nil || !s6.Addr().Is6() || s6.Addr().Is4In6() || s6.Bits() > 126 {
		add("sandbox.synthetic_cidr6", "%q is not an IPv6 CIDR of /126 or wider; write e.g. \"fd00:a11e:5eed::/64\"", c.Sandbox.SyntheticCIDR6)
	} else if l6, err := netip.ParsePrefix(c.Sandbox.LinkCIDR6); err == nil && l6.Overlaps(s6) {
		add("sandbox.synthetic_cidr6", "%s overlaps sandbox.link_cidr6 %s; pick ranges apart", s6, l6)
	}
	c.validateState(add)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}

func (c *Config) validateUpstream() []string {
	var probs []string
	keys := make([]string, 0, len(c.Upstream.Resolve))
	for k := range c.Upstream.Resolve {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.Upstream.Resolve[k]
		key := fmt.Sprintf("upstream.resolve[%q]", k)
		if h, p, err := net.SplitHostPort(k); err != nil || h == "" || !validPort(p) {
			probs = append(probs, fmt.Sprintf("config: %s: the key must be host:port, e.g. \"api.example.com:443\"", key))
		}
		if _, err := netip.ParseAddrPort(v); err != nil {
			probs = append(probs, fmt.Sprintf("config: %s: %q is not ip:port; the target must be an IP literal and port, e.g. \"192.0.2.7:8443\"", key, v))
		}
	}
	for i, f := range c.Upstream.CAFiles {
		key := fmt.Sprintf("upstream.ca_files[%d]", i)
		b, err := os.ReadFile(f)
		if err != nil {
			where := ""
			if !filepath.IsAbs(f) {
				if wd, err := os.Getwd(); err == nil {
					where = " (a relative path is read from the working directory, " + wd + ")"
				}
			}
			probs = append(probs, fmt.Sprintf("config: %s: cannot read %q%s: %v", key, f, where, err))
			continue
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			probs = append(probs, fmt.Sprintf("config: %s: %q holds no PEM certificate", key, f))
		}
	}
	return probs
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// checkGlob returns "" for an exact host or a leading "*." wildcard.
func checkGlob(h string) string {
	if h == "" {
		return "is empty; write a host such as \"api.github.com\" or \"*.github.com\""
	}
	rest := strings.TrimPrefix(h, "*.")
	if strings.ContainsAny(rest, "*/:@?# ") {
		return "is not a host glob: only a leading \"*.\" wildcard is allowed, with no scheme, port or path"
	}
	return ""
}

// Error lists every configuration problem found.
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

// validateApprovalSizes checks approval.max_body, then that
// max_body <= max_held_bytes_per_session <= max_held_bytes (one session
// can hold one body; all of them together no more than the whole budget),
// naming the setting to raise.
func (c *Config) validateApprovalSizes(add func(key, format string, args ...any)) {
	a := c.Approval
	if a.MaxBody < 1 || a.MaxBody > 64<<20 {
		add("approval.max_body", "%d is out of range; use 1..67108864 bytes", a.MaxBody)
		return
	}
	switch {
	case a.MaxHeldBytes > 16<<30:
		add("approval.max_held_bytes", "%d is out of range; use at most 17179869184 bytes", a.MaxHeldBytes)
	case a.MaxHeldBytesSession < a.MaxBody:
		add("approval.max_held_bytes_per_session", "%d is less than approval.max_body (%d), so no held request would fit; raise it to at least %d",
			a.MaxHeldBytesSession, a.MaxBody, a.MaxBody)
	case a.MaxHeldBytes < a.MaxHeldBytesSession:
		add("approval.max_held_bytes", "%d is less than approval.max_held_bytes_per_session (%d); raise it to at least %d",
			a.MaxHeldBytes, a.MaxHeldBytesSession, a.MaxHeldBytesSession)
	}
}

// validateWebhooks checks approval.webhooks: each an https URL (http only
// to a loopback address: the body names what waits for approval) and a
// secret file.
func (c *Config) validateWebhooks(add func(key, format string, args ...any)) {
	for i, h := range c.Approval.Webhooks {
		key := fmt.Sprintf("approval.webhooks[%d]", i)
		u, err := url.Parse(h.URL)
		switch {
		case err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && u.Scheme != "http"):
			add(key+".url", "%q is not an https://host/path URL", h.URL)
		case u.Scheme == "http" && !loopbackHost(u.Hostname()):
			add(key+".url", "%q sends approvals in clear text; use https:// (http:// only to a loopback address)", h.URL)
		}
		if h.SecretFile == "" {
			add(key+".secret_file", "is required: a file holding the secret that signs each POST (X-Aileron-Signature); e.g. `(umask 077; openssl rand -hex 32 > hook.secret)` (only its owner may read it)")
		}
	}
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// validateWeb checks the approvals page: loopback by default; anywhere else
// only over HTTPS (admin.web_tls_cert, admin.web_tls_key) and for the host
// names admin.web_hosts lists, since the page decides what leaves.
func (c *Config) validateWeb(add func(key, format string, args ...any)) {
	a := c.Admin
	if (a.WebTLSCert == "") != (a.WebTLSKey == "") {
		add("admin.web_tls_cert", "and admin.web_tls_key go together: set both PEM files, or neither")
	}
	for _, f := range []struct{ key, path string }{{"admin.web_tls_cert", a.WebTLSCert}, {"admin.web_tls_key", a.WebTLSKey}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				add(f.key, "%v", err)
			}
		}
	}
	if len(a.WebHosts) > 0 && a.WebTLSCert == "" {
		add("admin.web_hosts", "names the page under a host name, which is served only over HTTPS: set admin.web_tls_cert and admin.web_tls_key too "+
			"(review URLs and the login would otherwise travel in clear text)")
	}
	for i, h := range a.WebHosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			add(fmt.Sprintf("admin.web_hosts[%d]", i), "%q is not a host name such as approvals.example.com (no port, scheme or path)", h)
		}
	}
	if a.WebListen == "" {
		return
	}
	ap, err := netip.ParseAddrPort(a.WebListen)
	switch {
	case err != nil:
		add("admin.web_listen", "%q is not an ip:port such as \"127.0.0.1:9091\", or \"\" to turn the page off", a.WebListen)
	case !ap.Addr().IsLoopback() && (a.WebTLSCert == "" || len(a.WebHosts) == 0):
		add("admin.web_listen", "%q is not loopback: the approvals page decides what leaves, so off this machine it is served only over HTTPS "+
			"(set admin.web_tls_cert and admin.web_tls_key) and only for the names in admin.web_hosts; or use \"127.0.0.1:9091\"", a.WebListen)
	}
}

// validateState checks the state section: a known backend, a DSN exactly
// when it is postgres, and a node name fit for audit lines.
func (c *Config) validateState(add func(key, format string, args ...any)) {
	switch c.State.Backend {
	case "sqlite":
		if c.State.DSN != "" {
			add("state.dsn", "is set but state.backend is sqlite; set state.backend: postgres to use it, or remove it")
		}
		if c.State.FleetKeyFile != "" && c.State.FleetKeyFile != filepath.Join(c.Home, "keys", "fleet.key") {
			add("state.fleet_key_file", "is set but state.backend is sqlite, which has no fleet; set state.backend: postgres, or remove it")
		}
	case "postgres":
		if strings.TrimSpace(c.State.DSN) == "" {
			add("state.dsn", "is empty; state.backend postgres needs a connection string such as \"postgres://aileron@db:5432/aileron?sslmode=verify-full\"")
		}
	default:
		add("state.backend", "%q is not one of sqlite, postgres", c.State.Backend)
	}
	if n := c.State.Node; n == "" || len(n) > 63 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		add("state.node", "%q is not a node name: 1 to 63 of a-z 0-9 . -, e.g. \"aileron-1\"", n)
	}
}

// MaskDSN returns dsn with any password replaced by "xxxxx", for showing
// a configuration (both the URL and the key=value forms).
func MaskDSN(dsn string) string {
	lower := strings.ToLower(dsn)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		scheme, _, _ := strings.Cut(dsn, "://")
		u, err := url.Parse(dsn)
		if err != nil { // unparsable: nothing of it but the scheme
			return scheme + "://xxxxx"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return regexp.MustCompile(`(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|(?:\\.|\S)+)`).ReplaceAllString(dsn, "${1}password=xxxxx")
}

// validateSources checks store.sources: each entry a github or gitlab
// authority with an https base URL, or an absolute mirror directory.
func (c *Config) validateSources(add func(key, format string, args ...any)) {
	for i, s := range c.Store.Sources {
		key := fmt.Sprintf("store.sources[%d]", i)
		switch {
		case s.Mirror != "" && (s.Authority != "" || s.BaseURL != ""):
			add(key, "sets mirror and authority/base_url; an entry is either {authority, base_url} or {mirror}")
		case s.Mirror != "":
			if !filepath.IsAbs(s.Mirror) {
				add(key+".mirror", "%q is not an absolute path; write e.g. \"/srv/aileron-mirror\"", s.Mirror)
			}
		case s.Authority == "" && s.BaseURL == "":
			add(key, "is empty; write {authority: github, base_url: \"https://github.com\"} or {mirror: /srv/aileron-mirror}")
		default:
			if s.Authority != "github" && s.Authority != "gitlab" {
				msg := fmt.Sprintf("%q is not a source authority; use github or gitlab (or a mirror entry for any other)", s.Authority)
				if near, ok := policy.Closest(s.Authority, []string{"github", "gitlab"}); ok {
					msg = fmt.Sprintf("%q is not a source authority; did you mean %q? (github or gitlab, or a mirror entry for any other)", s.Authority, near)
				}
				add(key+".authority", "%s", msg)
			}
			u, err := url.Parse(s.BaseURL)
			switch {
			case err != nil || u.Scheme != "https" || u.Host == "":
				add(key+".base_url", "%q is not an https URL such as \"https://github.com\"; packages are fetched over https only", s.BaseURL)
			case u.User != nil || u.RawQuery != "" || u.Fragment != "":
				add(key+".base_url", "carries a user, password, query or fragment; a base URL is scheme, host and an optional path")
			}
		}
	}
}
