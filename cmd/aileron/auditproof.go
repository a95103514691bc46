package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/witness"
	"golang.org/x/mod/sumdb/note"
)

// auditVerify checks the trail: every line's chain link, and with the
// trail's key its tree and checkpoints, against the daemon's Mark and,
// when asked, a witness. It exits non-zero naming the first problem.
func auditVerify(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit verify", "audit verify [FILES…] [--dir DIR --node NAME] [--key VKEY] [--witness URL [--witness-key KEY]]   (default: the trail in audit.dir)", stderr)
	_, cfgFile := clientFlags(fs)
	vkey := fs.String("key", "", "the trail's public key (aileron audit key); default: the daemon's key file")
	dir := fs.String("dir", "", "verify the trail in this directory instead of audit.dir (another node's, copied or mounted; needs --key)")
	node := fs.String("node", "", "in a fleet: the node whose trail it is, checked against that node's record in the shared state (default state.node)")
	wurl := fs.String("witness", "", "also compare with what this witness cosigned (its base URL; needs --witness-key)")
	wkey := fs.String("witness-key", "", "the witness's key (aileron witness --print-key): its cosignature must verify")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wurl != "" && *wkey == "" {
		return usagef("--witness needs --witness-key (the witness's key, as `aileron witness --print-key` prints it): an answer whose cosignature is not checked proves nothing")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	if *dir != "" && *vkey == "" {
		return usagef("--dir needs --key: the public key of the node that wrote that trail (aileron audit key, run there)")
	}
	if *node != "" {
		if cfg.State.Backend != "postgres" {
			return usagef("--node names a node of a fleet; this configuration has no shared state (state.backend is %s)", cfg.State.Backend)
		}
		cfg.State.Node = *node
	}
	o := audit.VerifyOptions{Files: fs.Args(), VerifierKey: *vkey}
	if fs.NArg() == 0 {
		o.Files, o.Dir = nil, cfg.Audit.Dir
		if *dir != "" {
			o.Dir = *dir
		}
		if *dir == "" || *node != "" { // another directory is checked against a record only when named
			if o.Mark, err = loadMark(cfg); err != nil {
				return err
			}
			if o.Mark == nil && *node != "" {
				return fmt.Errorf("the fleet's state holds no audit record of node %q (nodes on record: %s)", *node, recordedNodes(cfg))
			}
		}
		if *vkey == "" {
			if o.Key, err = audit.LoadPublicKey(cfg.Audit.KeyFile); err != nil && o.Mark != nil {
				return err // the daemon signs this trail: its key must be at hand
			}
		}
	}
	if o.Dir != "" {
		if err := auditDirExists(o.Dir); err != nil {
			return err
		}
	}
	rep, err := audit.VerifyTrail(o)
	if err != nil {
		return err
	}
	witnessed := ""
	if rep.OK && *wurl != "" {
		if witnessed, err = againstWitness(&rep, o, *wurl, *wkey); err != nil {
			return err
		}
	}
	if !rep.OK {
		if rep.File == "" { // the trail as a whole: no line to point at
			return fmt.Errorf("%s: %s (%d line(s) checked)", rep.Kind, rep.Problem, rep.Lines)
		}
		return fmt.Errorf("%s at %s:%d (seq %d): %s; %d line(s) checked", rep.Kind, rep.File, rep.Line, rep.Seq, rep.Problem, rep.Lines)
	}
	printVerified(stdout, rep, o)
	fmt.Fprint(stdout, witnessed)
	return nil
}

// auditDirExists names audit.dir and how to point at another when the
// trail's directory is not there.
func auditDirExists(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit.dir %s does not exist: if the daemon runs with another audit.dir, pass its --config (or the same AILERON_AUDIT__DIR)", dir)
	}
	return nil
}

func printVerified(w io.Writer, rep audit.Report, o audit.VerifyOptions) {
	fmt.Fprintf(w, "ok: %d lines, seq %d..%d, last hash %s\n", rep.Lines, rep.FirstSeq, rep.LastSeq, rep.LastHash)
	switch {
	case o.Key == nil && o.VerifierKey == "":
		fmt.Fprintln(w, "note: the hash chain only (no key given): a rewritten trail with a recomputed chain, or a cut end, passes; pass --key")
	case rep.Checkpoints == 0:
		fmt.Fprintln(w, "note: no checkpoint yet: nothing of this trail is signed")
	default:
		fmt.Fprintf(w, "tree: %d checkpoint(s) verified, trail %s; the last signs %d line(s)", rep.Checkpoints, printable.Line(rep.Origin), rep.Signed)
		if rest := rep.LastSeq - rep.Signed; rest > 1 {
			fmt.Fprintf(w, "; %d line(s) after it are not signed yet", rest-1)
		}
		fmt.Fprintln(w)
	}
	if o.Mark != nil {
		fmt.Fprintf(w, "the daemon's last checkpoint (seq %d) is on record, unchanged\n", o.Mark.Seq)
	} else if o.Dir != "" {
		fmt.Fprintln(w, "note: no record of the daemon's last checkpoint: lines cut off the end would go unnoticed")
	}
	if rep.FirstSeq > 1 {
		fmt.Fprintf(w, "note: the first line has seq %d: earlier lines are not part of what was verified\n", rep.FirstSeq)
	}
}

// againstWitness compares the verified trail with the witness's latest
// cosigned checkpoint of it.
func againstWitness(rep *audit.Report, o audit.VerifyOptions, url, wkey string) (string, error) {
	if rep.Origin == "" {
		return "", errors.New("--witness: the trail has no checkpoint to compare (or no key was given)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	signed, err := witness.Latest(ctx, &http.Client{}, url, rep.Origin)
	if errors.Is(err, witness.ErrNoCheckpoint) {
		return "", fmt.Errorf("--witness %s holds no checkpoint of trail %s: does its --log have this trail's key (aileron audit key), and does the daemon push to it (audit.witnesses)?", url, rep.Origin)
	}
	if err != nil {
		return "", fmt.Errorf("--witness: %w", err)
	}
	t, err := witness.VerifyCosignature(wkey, signed)
	if err != nil {
		return "", fmt.Errorf("--witness: its cosignature does not verify with --witness-key: %w", err)
	}
	cp, err := openTrailCheckpoint(signed, rep.Origin, o)
	if err != nil {
		return "", fmt.Errorf("--witness: the checkpoint it holds is not signed by this trail's key: %w", err)
	}
	when := " on " + t.UTC().Format(time.RFC3339)
	size := cp.Size
	if te := rep.AgainstWitness(cp); te != nil {
		rep.OK, rep.Kind, rep.Problem, rep.Seq = false, te.Kind, te.Detail, te.Seq
		return "", nil
	}
	return fmt.Sprintf("witness: it cosigned %d line(s)%s, and this trail holds that very tree\n", size, when), nil
}

// openTrailCheckpoint checks a checkpoint's signature with the trail's
// key (the key file's, or --key) and parses it.
func openTrailCheckpoint(signed []byte, origin string, o audit.VerifyOptions) (audit.Checkpoint, error) {
	vkey := o.VerifierKey
	if vkey == "" && o.Key != nil {
		var err error
		if vkey, err = o.Key.VerifierKey(origin); err != nil {
			return audit.Checkpoint{}, err
		}
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return audit.Checkpoint{}, err
	}
	return audit.OpenCheckpoint(signed, v)
}

// loadMark reads the daemon's record of its last checkpoint from the
// state the configuration names (nil when there is none): in a fleet, the
// record of this node (state.node).
func loadMark(cfg *config.Config) (*audit.Mark, error) {
	if cfg.State.Backend != "postgres" {
		_, merr := os.Stat(filepath.Join(cfg.Home, fleetMarker)) // a fleet node's home: openState says what to pass
		if _, err := os.Stat(filepath.Join(cfg.Home, state.FileName)); errors.Is(err, os.ErrNotExist) && merr != nil {
			return nil, nil
		}
	}
	db, err := openState(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	m, err := (&markStore{db: db, node: markNode(cfg)}).LoadMark()
	if err != nil || m.Seq == 0 {
		return nil, err
	}
	return &m, nil
}

// auditKey prints the trail's public key, in the signed-note verifier key
// form witnesses and `audit verify --key` take.
func auditKey(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit key", "audit key [--origin ORIGIN]   (the trail's public key: for witnesses and offline checks)", stderr)
	_, cfgFile := clientFlags(fs)
	origin := fs.String("origin", "", "the key of this trail instead (an archived one: see its audit.trail_started line)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("want no arguments")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	var m *audit.Mark
	if *origin == "" {
		if m, err = loadMark(cfg); err != nil { // first: a fleet home without its config is refused with the fix
			return err
		}
	}
	key, err := audit.LoadPublicKey(cfg.Audit.KeyFile)
	if err != nil {
		return err
	}
	if *origin == "" {
		if m == nil {
			return errors.New("no trail is signed yet: start the daemon once (its first checkpoint names the trail)")
		}
		*origin = m.Origin
	}
	vkey, err := key.VerifierKey(*origin)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}

// auditProve prints the inclusion proof of one line.
func auditProve(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit prove", "audit prove SEQ [FILES…] [--witness URL --witness-key KEY]   (prints a proof that line SEQ is in a signed tree)", stderr)
	_, cfgFile := clientFlags(fs)
	wurl := fs.String("witness", "", "prove the line in the tree this witness cosigned last, carrying its cosignature")
	wkey := fs.String("witness-key", "", "the witness's key (aileron witness --print-key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*wurl == "") != (*wkey == "") {
		return usagef("--witness and --witness-key go together")
	}
	if fs.NArg() < 1 {
		return usagef("want the seq of a line (aileron audit tail --json shows them)")
	}
	seq, err := strconv.ParseUint(fs.Arg(0), 10, 64)
	if err != nil || seq == 0 {
		return usagef("%q is not a line's seq (1, 2, …)", fs.Arg(0))
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	files := fs.Args()[1:]
	if len(files) == 0 {
		if files, err = audit.ListFiles(cfg.Audit.Dir); err != nil {
			return err
		}
	}
	var p audit.Proof
	if *wurl != "" {
		key, kerr := audit.LoadPublicKey(cfg.Audit.KeyFile)
		if kerr != nil {
			return kerr
		}
		p, err = proveWitnessed(files, seq, key, *wurl, *wkey)
	} else {
		p, err = audit.Prove(files, seq)
	}
	if err != nil {
		return err
	}
	if isTerminal(stdout) { // to read: the line escaped (a file gets its exact bytes, which the proof needs)
		_, err = io.WriteString(stdout, printable.Text(string(p.Marshal())))
		return err
	}
	_, err = stdout.Write(p.Marshal())
	return err
}

// proveWitnessed proves line seq in the tree the witness cosigned last
// for the trail, so the proof carries the witness's cosignature; the
// checkpoint must be signed by the trail's key too.
func proveWitnessed(files []string, seq uint64, key *audit.Key, url, wkey string) (audit.Proof, error) {
	origin, err := audit.LastOrigin(files)
	if err != nil {
		return audit.Proof{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	signed, err := witness.Latest(ctx, &http.Client{}, url, origin)
	if err != nil {
		return audit.Proof{}, fmt.Errorf("--witness: %w", err)
	}
	if _, err := witness.VerifyCosignature(wkey, signed); err != nil {
		return audit.Proof{}, fmt.Errorf("--witness: its cosignature does not verify with --witness-key: %w", err)
	}
	cp, err := openTrailCheckpoint(signed, origin, audit.VerifyOptions{Key: key})
	if err != nil {
		return audit.Proof{}, fmt.Errorf("--witness: the checkpoint it holds is not signed by this trail's key: %w", err)
	}
	if cp.Size < seq {
		return audit.Proof{}, fmt.Errorf("the witness has cosigned %d line(s) of trail %s so far, not yet line %d; try again after the next checkpoint", cp.Size, cp.Origin, seq)
	}
	return audit.ProveIn(files, seq, cp, signed)
}

// auditCheckProof checks a proof offline, with only the public key.
func auditCheckProof(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("audit check-proof", "audit check-proof FILE|- --key VKEY [--witness-key KEY]   (offline: needs only the public keys)", stderr)
	vkey := fs.String("key", "", "the trail's public key, as aileron audit key printed it")
	wkey := fs.String("witness-key", "", "also require this witness's cosignature on the checkpoint (a proof made with prove --witness)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *vkey == "" {
		return usagef("want a proof file (or - for stdin) and --key")
	}
	var b []byte
	var err error
	if fs.Arg(0) == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 4<<20))
	} else {
		b, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return err
	}
	p, err := audit.ParseProof(b)
	if err != nil {
		return err
	}
	cp, err := p.Check(*vkey)
	if err != nil {
		return err
	}
	cosigned := ""
	if *wkey != "" {
		t, err := witness.VerifyCosignature(*wkey, p.Checkpoint)
		if err != nil {
			return fmt.Errorf("audit: proof: the checkpoint carries no cosignature of that witness: %w", err)
		}
		cosigned = fmt.Sprintf(", and cosigned by the witness on %s", t.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(stdout, "ok: line seq %d is in trail %s's tree of %d lines, signed by that key%s\n%s\n", p.Seq, printable.Line(cp.Origin), cp.Size,
		cosigned, printable.JSON(p.Line))
	return nil
}

// auditNewTrail starts a new trail on purpose, with the daemon stopped.
func auditNewTrail(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit new-trail", `audit new-trail --reason "..."   (daemon stopped: archives the present files, records the break)`, stderr)
	_, cfgFile := clientFlags(fs)
	reason := fs.String("reason", "", "why: recorded in the new trail's first line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reason == "" || fs.NArg() != 0 {
		return usagef(`want --reason "...": the new trail's first line records it`)
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	db, err := openState(context.Background(), cfg) // first: a fleet home without its config is refused before any key is made
	if err != nil {
		return err
	}
	defer db.Close()
	key, err := audit.LoadOrCreateKey(cfg.Audit.KeyFile)
	if err != nil {
		return err
	}
	l := newAuditLog(cfg.Audit.Dir, key, db, markNode(cfg))
	l.MaxFileBytes = cfg.Audit.MaxFileBytes
	archive, err := l.NewTrail(*reason)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	vkey, err := key.VerifierKey(l.TrailOrigin())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "new trail %s started; the previous files are in %s\n"+
		"its public key (add it to your witnesses' --log, keeping the old trail's there so the archive stays checkable;\n"+
		"the old trail's key is on the new trail's first line, and `aileron audit key --origin` prints any):\n%s\n", l.TrailOrigin(), archive, vkey)
	return nil
}

// recordedNodes lists the nodes whose audit record the fleet's state holds.
func recordedNodes(cfg *config.Config) string {
	db, err := openState(context.Background(), cfg)
	if err != nil {
		return "unknown: " + err.Error()
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT node FROM audit_marks WHERE node <> '' ORDER BY node`)
	if err != nil {
		return "unknown: " + err.Error()
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
