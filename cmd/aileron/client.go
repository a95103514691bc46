package main

import (
	"encoding/json"
	"io"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
)

// clientFlags adds the flags every client command shares.
func clientFlags(fs *pflag.FlagSet) (home, cfgFile *string) {
	home = fs.String("home", "", "state directory (env AILERON_HOME; default ~/.aileron)")
	cfgFile = fs.String("config", "", "the daemon's config file: its admin socket, audit.dir, audit.key_file and state.* (needed on a fleet node)")
	return home, cfgFile
}

// loadClientConfig resolves home and the admin socket the same way the
// daemon does.
func loadClientConfig(fs *pflag.FlagSet, cfgFile string) (*config.Config, error) {
	return config.Load(config.Options{File: cfgFile, Flags: fs, FlagKeys: map[string]string{"home": "home"}})
}

func newClient(cfg *config.Config) *admin.Client {
	return &admin.Client{Socket: cfg.Admin.Socket}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
