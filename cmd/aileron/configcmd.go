package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aileronhq/aileron/config"
)

func cmdConfig(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: print or defaults")
	}
	switch args[0] {
	case "defaults":
		_, err := stdout.Write(config.Defaults())
		return err
	case "print":
		fs := newFlags("config print", "config print [--config FILE] [--home DIR]", stderr)
		_, cfgFile := clientFlags(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		cfg, err := loadClientConfig(fs, *cfgFile)
		if err != nil {
			return err
		}
		return configPrint(cfg, *cfgFile, stdout)
	}
	return unknownSubcommand("config", args[0])
}

// configPrint prints the running daemon's configuration when one answers
// for the home (and no --config asked about a file), else the one a
// daemon would start with; a comment line says which.
func configPrint(cfg *config.Config, cfgFile string, stdout io.Writer) error {
	if cfgFile == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if b, pid, err := newClient(cfg).Config(ctx); err == nil {
			fmt.Fprintf(stdout, "# the running daemon's configuration (pid %d, admin socket %s)\n", pid, cfg.Admin.Socket)
			_, err = stdout.Write(b)
			return err
		}
	}
	b, err := cfg.YAML()
	if err != nil {
		return err
	}
	what := "no daemon answers for home " + cfg.Home + "; the configuration one would start with"
	if cfgFile != "" {
		what = "the configuration " + cfgFile + " gives, with the defaults and AILERON_* variables"
	}
	fmt.Fprintf(stdout, "# %s\n", what)
	_, err = stdout.Write(b)
	return err
}
