package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/metrics"
	"github.com/aileronhq/aileron/witness"
)

// witnessPushTimeout bounds one push to one witness.
const witnessPushTimeout = 10 * time.Second

// openWitnesses hands each checkpoint of the trail to the configured
// witnesses (audit.witnesses), from a goroutine of its own: a slow or
// unreachable witness never holds up the trail.
func (d *daemon) openWitnesses() error {
	if len(d.cfg.Audit.Witnesses) == 0 {
		return nil
	}
	p := &witnessPusher{dir: d.cfg.Audit.Dir, client: &http.Client{Timeout: witnessPushTimeout}, log: d.log,
		next: make(chan audit.Signed, 1), done: make(chan struct{})}
	for i, w := range d.cfg.Audit.Witnesses {
		if err := witness.CheckVerifierKey(w.Key); err != nil {
			return fmt.Errorf("config: audit.witnesses[%d].key: %w", i, err)
		}
		p.targets = append(p.targets, &witnessTarget{url: w.URL, key: w.Key})
	}
	d.audit.Checkpointed = p.offer
	d.witnesses = p
	go p.run()
	return nil
}

// witnessPusher pushes the newest checkpoint to each witness; when it
// falls behind, it skips to the newest (a witness needs only that).
type witnessPusher struct {
	dir     string
	client  *http.Client
	log     *zerolog.Logger
	targets []*witnessTarget
	mu      sync.Mutex
	closed  bool
	next    chan audit.Signed
	done    chan struct{}
}

// witnessTarget is one witness and what it last cosigned.
type witnessTarget struct {
	url, key string
	size     uint64        // the size it last cosigned (0: unknown yet)
	at       *audit.Signed // that checkpoint, when this daemon wrote it
	failing  string        // the last failure, logged once until it changes
	// cosigned and failures are for metrics, read from other goroutines.
	cosigned, failures atomic.Uint64
}

// figures are the witnesses' metrics.
func (p *witnessPusher) figures() []metrics.WitnessFigures {
	out := make([]metrics.WitnessFigures, len(p.targets))
	for i, t := range p.targets {
		out[i] = metrics.WitnessFigures{URL: t.url, Cosigned: t.cosigned.Load(), Failures: t.failures.Load()}
	}
	return out
}

// offer hands sg over, replacing a checkpoint not yet pushed.
func (p *witnessPusher) offer(sg audit.Signed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	select {
	case <-p.next:
	default:
	}
	p.next <- sg
}

func (p *witnessPusher) run() {
	defer close(p.done)
	for sg := range p.next {
		for _, t := range p.targets {
			p.push(t, sg)
		}
	}
}

// close stops taking checkpoints and waits (bounded) for the last push.
func (p *witnessPusher) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.next)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(2 * witnessPushTimeout):
	}
}

// push sends sg to t with a consistency proof from what t cosigned; a
// 409 tells which size that is, and the push is made again from there.
func (p *witnessPusher) push(t *witnessTarget, sg audit.Signed) {
	for range 2 {
		err := p.pushOnce(t, sg)
		var conflict *witness.ConflictError
		switch {
		case err == nil:
			t.cosigned.Store(sg.Size)
			if t.failing != "" {
				p.log.Info().Str("event", "audit.witness_ok").Str("witness", t.url).Uint64("size", sg.Size).Msg("the witness cosigns the trail again")
			}
			t.failing = ""
			return
		case errors.As(err, &conflict) && conflict.Size <= sg.Size && conflict.Size != t.size:
			t.size, t.at = conflict.Size, nil
			continue
		case errors.As(err, &conflict):
			err = fmt.Errorf("the witness cosigned %d lines of this trail, more than it holds (%d): the trail was cut or rolled back since", conflict.Size, sg.Size)
		case errors.Is(err, witness.ErrUnknownLog):
			err = fmt.Errorf("%w: the witness does not know trail %s; add its key (aileron audit key) to the witness's --log and restart it", err, sg.Origin)
		}
		p.failed(t, err)
		return
	}
}

func (p *witnessPusher) pushOnce(t *witnessTarget, sg audit.Signed) error {
	proof, err := audit.ProveConsistency(p.dir, t.size, sg.Size, t.at)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), witnessPushTimeout)
	defer cancel()
	cosig, err := witness.Push(ctx, p.client, t.url, t.size, proof, sg.Note)
	if err != nil {
		return err
	}
	if _, err := witness.VerifyCosignature(t.key, append(append([]byte(nil), sg.Note...), cosig...)); err != nil {
		return fmt.Errorf("its cosignature does not verify with audit.witnesses[].key: %w", err)
	}
	t.size, t.at = sg.Size, &sg
	return nil
}

func (p *witnessPusher) failed(t *witnessTarget, err error) {
	t.failures.Add(1)
	if err.Error() == t.failing {
		return
	}
	t.failing = err.Error()
	p.log.Error().Str("event", "audit.witness_failed").Str("witness", t.url).Err(err).
		Msg("a witness did not cosign the trail's checkpoint; the trail goes on, and the next checkpoint is pushed again")
}
