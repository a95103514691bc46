package main

import (
	"io"

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
		b, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	return unknownSubcommand("config", args[0], "print", "defaults")
}
