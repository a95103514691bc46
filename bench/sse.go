package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The streaming row: a model call answered as a server-sent event stream
// in the Anthropic Messages shape (message_start with usage, content
// deltas, message_delta with usage, message_stop), one event every
// sseGap, each flushed on its own, as a model streams tokens. Through the
// daemon the operation names the "anthropic" usage dialect, so the proxy
// reads the model and the tokens from the stream as it passes, and injects
// the key. Each delta carries the upstream's send time ("t", Unix
// nanoseconds), so the client measures how long each event took to arrive.
const (
	sseEvents = 50                     // content deltas per stream
	sseGap    = 500 * time.Microsecond // between events
)

// serveMessages answers POST /v1/messages with the event stream above
// when X-Api-Key is key (401 otherwise).
func serveMessages(key string, mismatches *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), []byte(key)) != 1 {
			mismatches.Add(1)
			http.Error(w, `{"error":"X-Api-Key is missing or wrong"}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
			http.Error(w, `{"error":"want a JSON body with a model"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		send := func(event, data string) bool {
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
		if !send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":5}}}`, req.Model)) {
			return
		}
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for range sseEvents {
			time.Sleep(sseGap)
			data := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"some streamed tokens "},"t":` +
				strconv.FormatInt(time.Now().UnixNano(), 10) + `}`
			if !send("content_block_delta", data) {
				return
			}
		}
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":%d}}`, sseEvents))
		send("message_stop", `{"type":"message_stop"}`)
	}
}

// sseRole is clientRole for the streaming row: conc loops POST a
// streaming message call to rawURL (with key in X-Api-Key when not
// empty: a direct run) and read each stream event by event. It reports
// every content delta as one "request" and P50MS as the median time a
// delta took from the upstream's send to the client.
func sseRole(c *http.Client, rawURL, key string, conc int, warm, dur time.Duration) error {
	var mu sync.Mutex
	var lat []time.Duration
	var events atomic.Int64
	measuring := atomic.Bool{}
	call := func(ctx context.Context) error {
		got, err := sseCall(ctx, c, rawURL, key)
		if err != nil {
			return err
		}
		if measuring.Load() {
			events.Add(int64(len(got)))
			mu.Lock()
			lat = append(lat, got...)
			mu.Unlock()
		}
		return nil
	}
	loop(conc, warm, nil, call)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "start")
	_ = out.Flush()
	measuring.Store(true)
	res := loop(conc, dur, nil, call)
	measuring.Store(false)
	fmt.Fprintln(out, "stop")
	mu.Lock()
	slices.Sort(lat)
	if len(lat) > 0 {
		res.P50MS = ms(percentile(lat, 0.5))
	}
	mu.Unlock()
	res.Requests = events.Load()
	_ = json.NewEncoder(out).Encode(res)
	return out.Flush()
}

// sseCall makes one streaming call and returns each content delta's
// transit time; a stream without every delta and a message_stop fails.
func sseCall(ctx context.Context, c *http.Client, rawURL, key string) ([]time.Duration, error) {
	body := `{"model":"claude-bench-1","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"bench"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	lat := make([]time.Duration, 0, sseEvents)
	stopped := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		now := time.Now().UnixNano()
		if i := bytes.LastIndex(line, []byte(`,"t":`)); i >= 0 {
			t, err := strconv.ParseInt(string(bytes.TrimSuffix(line[i+5:], []byte("}"))), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad event %q", line)
			}
			lat = append(lat, time.Duration(now-t))
		}
		stopped = stopped || bytes.Contains(line, []byte(`"type":"message_stop"`))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lat) != sseEvents || !stopped {
		return nil, fmt.Errorf("stream ended after %d of %d deltas (message_stop seen: %v)", len(lat), sseEvents, stopped)
	}
	return lat, nil
}
