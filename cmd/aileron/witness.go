package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aileronhq/aileron/witness"
)

// cmdWitness runs a witness of audit trails (C2SP tlog-witness): it
// cosigns each trail's checkpoints only when they are consistent with the
// largest one it cosigned before, and keeps that one across restarts.
func cmdWitness(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("witness", "witness --log VKEY... [--listen ADDR] [--dir DIR] [--name NAME] [--print-key]", stderr)
	_, cfgFile := clientFlags(fs)
	listen := fs.String("listen", "127.0.0.1:7380", "address to serve the witness protocol on")
	dir := fs.String("dir", "", "where the witness keeps its key and what it cosigned (default $home/witness)")
	name := fs.String("name", "", "the witness's key name (default <hostname>/aileron-witness)")
	logs := fs.StringArray("log", nil, "a trail's public key, as aileron audit key prints it on the trail's host (repeat for more)")
	printKey := fs.Bool("print-key", false, "print the witness's key (for audit.witnesses[].key) and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("want no arguments (trails are given with --log)")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = filepath.Join(cfg.Home, "witness")
	}
	if *name == "" {
		host, _ := os.Hostname()
		*name = fmt.Sprintf("%s/aileron-witness", cleanHost(host))
	}
	w := &witness.Witness{Dir: *dir, Name: *name, Logs: *logs, ErrorLog: log.New(stderr, "witness: ", log.LstdFlags)}
	addLog := log.New(stdout, "", log.LstdFlags)
	w.AddLog = func(origin string, size uint64, err error) {
		if err != nil {
			addLog.Printf("refused %s at %d lines: %v", origin, size, err)
			return
		}
		addLog.Printf("cosigned %s at %d lines", origin, size)
	}
	if *printKey {
		if err := w.Open(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, w.VerifierKey())
		return nil
	}
	if len(*logs) == 0 {
		return usagef("want at least one --log VKEY: the public key of a trail to witness (`aileron audit key` on its host)")
	}
	unlock, err := lockWitnessDir(*dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := w.Open(); err != nil {
		return err
	}
	return serveWitness(w, *listen, stdout)
}

func serveWitness(w *witness.Witness, listen string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("witness: listen: %w", err)
	}
	fmt.Fprintf(stdout, "witness %s on http://%s\nits key (audit.witnesses[].key on each daemon): %s\n", w.Name, ln.Addr(), w.VerifierKey())
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// lockWitnessDir keeps a second witness off the same directory: its
// check-and-store is atomic within one process.
func lockWitnessDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("witness: %s is in use by another witness: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// cleanHost makes a host name fit in a key name (no spaces, '+' or '/').
func cleanHost(host string) string {
	b := []byte(host)
	for i, c := range b {
		if c <= ' ' || c == '+' || c == '/' || c > '~' {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "localhost"
	}
	return string(b)
}
