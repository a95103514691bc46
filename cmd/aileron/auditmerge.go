package main

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/aileronhq/aileron/audit"
)

// mergeWindow is how long lines from several trails wait to be put in
// time order with the lines that arrive with them (-f).
const mergeWindow = 200 * time.Millisecond

// item is one line of one trail.
type item struct {
	line []byte
	ev   *audit.Event
}

// tailMany is audit.Tail over several trails (the nodes of a fleet), their
// lines merged by time: without follow a streaming merge of the trails
// (each in time order), with follow in batches of what arrived within
// mergeWindow. One trail is audit.Tail itself. A trail's failure ends
// them all.
func tailMany(ctx context.Context, dirs []string, follow bool, f audit.Filter, out func(line []byte, ev *audit.Event) error) error {
	if len(dirs) == 1 {
		return audit.Tail(ctx, dirs[0], follow, f, out)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chs := make([]chan item, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		chs[i] = make(chan item, 256)
		wg.Go(func() {
			defer close(chs[i])
			errs[i] = audit.Tail(ctx, dir, follow, f, func(line []byte, ev *audit.Event) error {
				select {
				case chs[i] <- item{line, ev}:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if errs[i] != nil && !errors.Is(errs[i], context.Canceled) {
				cancel()
			}
		})
	}
	defer wg.Wait()
	if !follow {
		if err := mergeSorted(chs, out); err != nil {
			cancel()
			return err
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	ch := make(chan item, 1024)
	for _, c := range chs {
		wg.Go(func() {
			for it := range c {
				select {
				case ch <- it:
				case <-ctx.Done():
				}
			}
		})
	}
	go func() { wg.Wait(); close(ch) }()
	err := mergeWindows(ch, out)
	cancel()
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// mergeSorted emits the lines of chs, each in time order, in time order.
func mergeSorted(chs []chan item, out func(line []byte, ev *audit.Event) error) error {
	heads := make([]*item, len(chs))
	for {
		best := -1
		for i, c := range chs {
			if heads[i] == nil && c != nil {
				if it, ok := <-c; ok {
					heads[i] = &it
				} else {
					chs[i] = nil
				}
			}
			if heads[i] != nil && (best < 0 || heads[i].ev.Time.Before(heads[best].ev.Time)) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		if err := out(heads[best].line, heads[best].ev); err != nil {
			return err
		}
		heads[best] = nil
	}
}

// mergeWindows emits what arrives on ch in batches of mergeWindow, each
// put in time order.
func mergeWindows(ch <-chan item, out func(line []byte, ev *audit.Event) error) error {
	var batch []item
	flush := func() error {
		sort.SliceStable(batch, func(i, j int) bool { return batch[i].ev.Time.Before(batch[j].ev.Time) })
		for _, it := range batch {
			if err := out(it.line, it.ev); err != nil {
				return err
			}
		}
		batch = batch[:0]
		return nil
	}
	var tick <-chan time.Time
	for {
		select {
		case it, ok := <-ch:
			if !ok {
				return flush()
			}
			batch = append(batch, it)
			if tick == nil {
				tick = time.After(mergeWindow)
			}
		case <-tick:
			tick = nil
			if err := flush(); err != nil {
				return err
			}
		}
	}
}
