package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
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

// printJSON writes v as indented JSON, every character a terminal would
// act on (U+202E, C1 controls, …) as its \u escape: the same JSON value.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(printable.JSON(b), '\n'))
	return err
}

// isTerminal reports whether w is a terminal: a file that answers the
// terminal ioctl (a character device such as /dev/null does not).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
