package config

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// Defaults returns the embedded default configuration file, as shipped.
func Defaults() []byte { return append([]byte(nil), defaultsYAML...) }

// Config is the daemon's effective configuration.
type Config struct {
	Home     string   `koanf:"home"`
	Proxy    Proxy    `koanf:"proxy"`
	Admin    Admin    `koanf:"admin"`
	Upstream Upstream `koanf:"upstream"`
	Egress   Egress   `koanf:"egress"`
	Sessions Sessions `koanf:"sessions"`
	Audit    Audit    `koanf:"audit"`
	Approval Approval `koanf:"approval"`
	Actions  Actions  `koanf:"actions"`
	Sandbox  Sandbox  `koanf:"sandbox"`
	State    State    `koanf:"state"`
	Store    Store    `koanf:"store"`
	Log      Log      `koanf:"log"`
}

// Store configures the connector store.
type Store struct {
	// RequireSignature refuses to install a connector package that is
	// unsigned or signed by a key the trust store does not list for its
	// authority (aileron trust); local:// packages are exempt.
	RequireSignature bool `koanf:"require_signature"`

	// Sources are where `connector install FQN@VERSION` looks, in order:
	// the first that has the package wins. See docs/connectors.md,
	// "Publishing a package".
	Sources []StoreSource `koanf:"sources"`
}

// StoreSource is one place packages are fetched from: a release
// convention under an https base URL (Authority "github" or "gitlab"), or
// a local mirror directory. An entry sets Authority and BaseURL, or Mirror.
type StoreSource struct {
	Authority string `koanf:"authority"`
	BaseURL   string `koanf:"base_url"`
	Mirror    string `koanf:"mirror"`
}

// State selects where the control-plane state lives: one node's SQLite
// file (the default), or a Postgres server a fleet of nodes shares.
type State struct {
	// Backend is "sqlite" or "postgres".
	Backend string `koanf:"backend"`
	// DSN is the Postgres connection string (postgres only). A password in
	// it is masked wherever the configuration is shown; a libpq password
	// file (PGPASSFILE) keeps it out of the file altogether.
	DSN string `koanf:"dsn"`
	// FleetKeyFile is the fleet key every node of a fleet shares (postgres
	// only; "" = $home/keys/fleet.key): session CAs and tokens are derived from
	// it, so that any node serves any session.
	FleetKeyFile string `koanf:"fleet_key_file"`
	// VaultKeyFile is the age identity the credential vault is sealed to
	// ("" = $home/keys/vault.key). A fleet's nodes hold copies of one file.
	VaultKeyFile string `koanf:"vault_key_file"`
	// Node names this node in a fleet: its audit lines and trail carry it.
	// "" means the host name.
	Node string `koanf:"node"`
}

// Sandbox configures fenced sandboxes (aileron sandbox run) and gateways
// (sandbox attach): the ranges their veth links are carved from, one /30
// and one /64 per sandbox, and the synthetic ranges their policy DNS
// answers from.
type Sandbox struct {
	LinkCIDR       string `koanf:"link_cidr"`
	LinkCIDR6      string `koanf:"link_cidr6"`
	SyntheticCIDR  string `koanf:"synthetic_cidr"`
	SyntheticCIDR6 string `koanf:"synthetic_cidr6"`
}

// Audit configures the tamper-evident audit trail.
type Audit struct {
	Enabled      bool          `koanf:"enabled"`
	Dir          string        `koanf:"dir"`
	MaxFileBytes int64         `koanf:"max_file_bytes"`
	SyncInterval time.Duration `koanf:"sync_interval"`
	Stdout       bool          `koanf:"stdout"`
	// The trail's Merkle tree is signed (a checkpoint line) after
	// CheckpointEvery lines and at least every CheckpointInterval, even
	// when idle, with the Ed25519 key in KeyFile ("" = $home/audit.key,
	// created 0600 on first start).
	CheckpointEvery    int           `koanf:"checkpoint_every"`
	CheckpointInterval time.Duration `koanf:"checkpoint_interval"`
	KeyFile            string        `koanf:"key_file"`
	// Witnesses get each checkpoint (C2SP tlog-witness protocol); their
	// cosignatures prove to a third party what the trail held.
	Witnesses []Witness `koanf:"witnesses"`
}

// Witness is one witness of the audit trail.
type Witness struct {
	// URL is the witness's base URL (add-checkpoint is under it).
	URL string `koanf:"url"`
	// Key is the witness's cosignature verifier key ("name+hash+base64",
	// as `aileron witness` prints it).
	Key string `koanf:"key"`
}

// Proxy configures the sandbox-facing listener.
type Proxy struct {
	Listen            string        `koanf:"listen"`
	Advertise         string        `koanf:"advertise"`
	Passthrough       []Passthrough `koanf:"passthrough"`
	HandshakeTimeout  time.Duration `koanf:"handshake_timeout"`
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	IdleTimeout       time.Duration `koanf:"idle_timeout"`
	TunnelIdleTimeout time.Duration `koanf:"tunnel_idle_timeout"`
	BodyIdleTimeout   time.Duration `koanf:"body_idle_timeout"`
	BodyMinRate       int           `koanf:"body_min_rate"`
	MaxHeaderBytes    int           `koanf:"max_header_bytes"`
	ShutdownTimeout   time.Duration `koanf:"shutdown_timeout"`
	// MaxCheckedBody bounds a request body read whole to check it against
	// its operation's input schema; a longer one is refused 413.
	MaxCheckedBody int64 `koanf:"max_checked_body"`
}

// Passthrough lets CONNECTs to matching hosts through as raw tunnels.
type Passthrough struct {
	Host string `koanf:"host"`
	Port int    `koanf:"port"`
}

// Admin configures the control-plane API.
type Admin struct {
	Socket    string `koanf:"socket"`
	WebListen string `koanf:"web_listen"`
	// WebTLSCert and WebTLSKey (PEM files) serve the approvals page over
	// HTTPS; required for a web_listen that is not loopback, with
	// WebHosts: the host names the page answers to (DNS rebinding).
	WebTLSCert string   `koanf:"web_tls_cert"`
	WebTLSKey  string   `koanf:"web_tls_key"`
	WebHosts   []string `koanf:"web_hosts"`
	// MetricsListen serves GET /metrics (Prometheus) on TCP for scrapers
	// that cannot reach the admin socket; "" (the default) serves it on
	// the socket only.
	MetricsListen string `koanf:"metrics_listen"`
}

// Approval configures the approval gate.
type Approval struct {
	Hold                 time.Duration `koanf:"hold"`
	MaxBody              int64         `koanf:"max_body"`
	MaxHeldBytes         int64         `koanf:"max_held_bytes"`
	MaxHeldBytesSession  int64         `koanf:"max_held_bytes_per_session"`
	MaxPendingPerSession int           `koanf:"max_pending_per_session"`
	TTL                  time.Duration `koanf:"ttl"`
	// Webhooks are told of every approval event (requested, approved,
	// denied, expired) with a signed POST.
	Webhooks []Webhook `koanf:"webhooks"`
}

// Webhook is where approval events are POSTed, and the file holding the
// secret that signs them (X-Aileron-Signature, HMAC-SHA256).
type Webhook struct {
	URL        string `koanf:"url"`
	SecretFile string `koanf:"secret_file"`
}

// Upstream configures how the proxy reaches the far side.
type Upstream struct {
	Resolve               map[string]string `koanf:"resolve"`
	CAFiles               []string          `koanf:"ca_files"`
	DialTimeout           time.Duration     `koanf:"dial_timeout"`
	TLSHandshakeTimeout   time.Duration     `koanf:"tls_handshake_timeout"`
	ResponseHeaderTimeout time.Duration     `koanf:"response_header_timeout"`
}

// Egress configures the SSRF guard.
type Egress struct {
	AllowCIDRs []string `koanf:"allow_cidrs"`
}

// Sessions configures session defaults.
type Sessions struct {
	DefaultTTL time.Duration `koanf:"default_ttl"`
}

// Actions configures action runs.
type Actions struct {
	// DefaultTimeout is the deadline of a run whose action sets no
	// timeout, counted from when its steps start (1s..1h).
	DefaultTimeout time.Duration `koanf:"default_timeout"`
}

// Log configures the daemon's own log.
type Log struct {
	Level string `koanf:"level"`
}

// Options says where Load reads from. The zero value reads the defaults and
// the process environment only.
type Options struct {
	// File is a YAML file; empty means none.
	File string
	// Flags are applied last; only flags the user changed override, and only
	// those named in FlagKeys (flag name → config key, e.g. "listen" →
	// "proxy.listen").
	Flags    *pflag.FlagSet
	FlagKeys map[string]string
	// Environ is the environment; nil means os.Environ().
	Environ []string
}

// Load builds the effective configuration. Every failure names the source
// or key at fault.
func Load(opts Options) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaultsYAML), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config: embedded defaults: %w", err)
	}
	var probs []string
	if opts.File != "" {
		data, err := os.ReadFile(opts.File)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		tree, err := yaml.Parser().Unmarshal(data)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w (the file must be YAML; see `aileron config defaults`)", opts.File, err)
		}
		probs = append(probs, checkTree(tree, opts.File)...)
		if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: %s: %w (the file must be YAML; see `aileron config defaults`)", opts.File, err)
		}
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "AILERON_") {
			continue
		}
		key, v := envKey(name, value)
		if p := checkEnvKey(name, key); p != "" {
			probs = append(probs, p)
		} else if ft, ok := typeAt(reflect.TypeFor[Config](), key); ok {
			probs = append(probs, checkEnvValue(name, key, ft, v)...)
		}
	}
	if len(probs) > 0 {
		return nil, errors.New(strings.Join(probs, "\n"))
	}
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:        "AILERON_",
		TransformFunc: envKey,
		EnvironFunc:   func() []string { return environ },
	}), nil); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	if opts.Flags != nil {
		cb := func(f *pflag.Flag) (string, any) {
			return opts.FlagKeys[f.Name], posflag.FlagVal(opts.Flags, f)
		}
		if err := k.Load(posflag.ProviderWithFlag(opts.Flags, ".", k, cb), nil); err != nil {
			return nil, fmt.Errorf("config: flags: %w", err)
		}
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.finish(environ); err != nil {
		return nil, err
	}
	return &c, nil
}

// envKey maps AILERON_PROXY__LISTEN to proxy.listen. A value that looks like
// a YAML list or map (starting with [ or {) is parsed as one.
func envKey(k, v string) (string, any) {
	key := strings.ToLower(strings.TrimPrefix(k, "AILERON_"))
	key = strings.ReplaceAll(key, "__", ".")
	if t := strings.TrimSpace(v); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
		if parsed, err := yaml.Parser().Unmarshal([]byte("v: " + t)); err == nil {
			return key, parsed["v"]
		}
	}
	return key, v
}

// finish fills derived defaults and validates.
func (c *Config) finish(environ []string) error {
	if c.Home == "" {
		home, err := defaultHome(environ)
		if err != nil {
			return err
		}
		c.Home = home
	}
	abs, err := filepath.Abs(c.Home)
	if err != nil {
		return fmt.Errorf("config: home: %w", err)
	}
	c.Home = abs
	if c.Admin.Socket == "" {
		c.Admin.Socket = filepath.Join(c.Home, "admin.sock")
	}
	if c.Audit.KeyFile == "" {
		c.Audit.KeyFile = filepath.Join(c.Home, "audit.key")
	}
	if c.Audit.Dir == "" {
		c.Audit.Dir = filepath.Join(c.Home, "audit")
	}
	if c.State.FleetKeyFile == "" {
		c.State.FleetKeyFile = filepath.Join(c.Home, "keys", "fleet.key")
	}
	if c.State.VaultKeyFile == "" {
		c.State.VaultKeyFile = filepath.Join(c.Home, "keys", "vault.key")
	}
	if c.State.Node == "" {
		c.State.Node = defaultNode()
	}
	return c.Validate()
}

func defaultHome(environ []string) (string, error) {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok && v != "" {
			return filepath.Join(v, ".aileron"), nil
		}
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return "", errors.New("config: home: cannot find a home directory; set AILERON_HOME or home: in the config file")
	}
	return filepath.Join(dir, ".aileron"), nil
}

// defaultNode is the host name as a node name (lower case, characters
// outside a-z 0-9 . - as "-"), or "node" when there is none.
func defaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	h = strings.ToLower(h)
	b := []byte(h)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b)
}

// YAML renders the effective configuration as YAML, in the file format
// Load reads. The one secret it may hold, a password in state.dsn, is
// masked.
func (c *Config) YAML() ([]byte, error) {
	k := koanf.New(".")
	shown := *c
	shown.State.DSN = MaskDSN(c.State.DSN)
	if err := k.Load(structs.Provider(shown, "koanf"), nil); err != nil {
		return nil, err
	}
	return k.Marshal(yaml.Parser())
}

// Changed lists the keys (dotted, sorted) whose values differ between a
// and b, for saying what a reload did not apply.
func Changed(a, b *Config) []string {
	flat := func(c *Config) map[string]any {
		k := koanf.New(".")
		if err := k.Load(structs.Provider(*c, "koanf"), nil); err != nil {
			return nil
		}
		return k.All()
	}
	fa, fb := flat(a), flat(b)
	var out []string
	for key, v := range fa {
		if w, ok := fb[key]; !ok || !reflect.DeepEqual(v, w) {
			out = append(out, key)
		}
	}
	for key := range fb {
		if _, ok := fa[key]; !ok {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}
