package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// maxRequestSize bounds an add-checkpoint body: the checkpoint plus the
// old size line and at most 63 proof lines.
const maxRequestSize = maxCheckpointSize + 4<<10

// maxResponseSize bounds what the client reads of an answer.
const maxResponseSize = maxCheckpointSize + 64<<10

// sizeContentType is the Content-Type of a 409 answer (c2sp.org/tlog-witness).
const sizeContentType = "text/x.tlog.size"

// Handler serves, relative to wherever it is mounted (use
// http.StripPrefix for a prefix):
//
//   - POST /add-checkpoint: c2sp.org/tlog-witness. 200 with the
//     cosignature line(s); 400 malformed; 403 no valid signature from the
//     log's key; 404 unknown origin; 409 (Content-Type text/x.tlog.size,
//     body "<size>\n") old size is not the size the witness last
//     cosigned, or same size and another root; 413 body too large;
//     422 the consistency proof does not verify.
//   - GET /checkpoint?origin=<origin>: NOT part of the C2SP protocol, an
//     Aileron extension for verifiers: 200 with the latest checkpoint the
//     witness cosigned for origin (the body, the log's signature lines that
//     verified, then the witness's cosignature line); 404 when there is
//     none or the origin is unknown; 400 without origin.
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", w.serveAdd)
	mux.HandleFunc("GET /checkpoint", w.serveCheckpoint)
	return mux
}

func (w *Witness) serveAdd(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxRequestSize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(rw, fmt.Sprintf("witness: request body larger than %d bytes", maxRequestSize), http.StatusRequestEntityTooLarge)
			return
		}
		w.writeError(rw, fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err))
		return
	}
	old, proof, checkpoint, err := parseAddRequest(body)
	if err != nil {
		w.writeError(rw, err)
		return
	}
	cosig, err := w.Add(old, proof, checkpoint)
	if w.AddLog != nil {
		origin, size, _, _ := ParseCheckpoint(string(checkpointBody(checkpoint)))
		w.AddLog(origin, size, err)
	}
	if err != nil {
		w.writeError(rw, err)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(cosig)
}

// checkpointBody is a signed note's text (up to its blank line).
func checkpointBody(note []byte) []byte {
	if i := bytes.Index(note, []byte("\n\n")); i >= 0 {
		return note[:i+1]
	}
	return note
}

func (w *Witness) serveCheckpoint(rw http.ResponseWriter, r *http.Request) {
	origin := r.URL.Query().Get("origin")
	if origin == "" {
		w.writeError(rw, fmt.Errorf("%w: the origin query parameter is missing", ErrBadRequest))
		return
	}
	n, err := w.latest(origin)
	if err != nil {
		w.writeError(rw, err)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-store")
	_, _ = rw.Write(n)
}

// statusOf is the one mapping from Add's errors to HTTP statuses.
func statusOf(err error) int {
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		return http.StatusConflict
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrUnknownLog), errors.Is(err, ErrNoCheckpoint):
		return http.StatusNotFound
	case errors.Is(err, ErrBadProof):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// writeError answers err with its status; a 409 carries the size, a 500
// only a generic text (the detail goes to ErrorLog).
func (w *Witness) writeError(rw http.ResponseWriter, err error) {
	code := statusOf(err)
	switch code {
	case http.StatusConflict:
		var conflict *ConflictError
		errors.As(err, &conflict)
		rw.Header().Set("Content-Type", sizeContentType)
		rw.WriteHeader(code)
		_, _ = fmt.Fprintf(rw, "%d\n", conflict.Size)
	case http.StatusInternalServerError:
		logger := w.ErrorLog
		if logger == nil {
			logger = log.Default()
		}
		logger.Printf("witness: internal error: %v", err)
		http.Error(rw, "witness: internal error", code)
	default:
		http.Error(rw, err.Error(), code)
	}
}

// Push sends checkpoint to the witness at baseURL (its submission prefix,
// e.g. "https://witness.example/w1") with POST <baseURL>/add-checkpoint,
// and returns the cosignature line(s). old is the size the client believes
// the witness last cosigned (0 for none), proof the consistency proof from
// it. On 409 it returns a *ConflictError with the witness's size; on 400,
// 403, 404 and 422 an error wrapping ErrBadRequest, ErrBadSignature,
// ErrUnknownLog or ErrBadProof with the witness's text. A nil c means
// http.DefaultClient.
func Push(ctx context.Context, c *http.Client, baseURL string, old uint64, proof []tlog.Hash, checkpoint []byte) ([]byte, error) {
	if len(proof) > MaxProofLines {
		return nil, fmt.Errorf("%w: %d proof hashes, at most %d", ErrBadRequest, len(proof), MaxProofLines)
	}
	body := formatAddRequest(old, proof, checkpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint(baseURL, "add-checkpoint"), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	code, resp, err := do(c, req)
	if err != nil {
		return nil, err
	}
	switch code {
	case http.StatusOK:
		if !validCosigLines(resp) {
			return nil, fmt.Errorf("witness: the witness answered 200 without signature lines: %s", excerpt(resp))
		}
		return resp, nil
	case http.StatusConflict:
		size, ok := strings.CutSuffix(string(resp), "\n")
		n, valid := parseSize(size)
		if !ok || !valid {
			return nil, fmt.Errorf("witness: the witness answered 409 with a malformed size: %s", excerpt(resp))
		}
		return nil, &ConflictError{Size: n}
	}
	return nil, statusError(code, resp, ErrUnknownLog)
}

// Latest fetches the latest checkpoint the witness at baseURL (its
// monitoring prefix) cosigned for origin, with GET
// <baseURL>/checkpoint?origin=<origin> (an Aileron extension, not C2SP).
// It checks nothing: verify the log's signature with note.Open and the
// witness's with VerifyCosignature. On 404 the error wraps ErrNoCheckpoint.
func Latest(ctx context.Context, c *http.Client, baseURL, origin string) ([]byte, error) {
	u := endpoint(baseURL, "checkpoint") + "?origin=" + url.QueryEscape(origin)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	code, resp, err := do(c, req)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, statusError(code, resp, ErrNoCheckpoint)
	}
	return resp, nil
}

func endpoint(baseURL, name string) string {
	return strings.TrimSuffix(baseURL, "/") + "/" + name
}

// do sends req and reads at most maxResponseSize of the answer.
func do(c *http.Client, req *http.Request) (int, []byte, error) {
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("witness: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize+1))
	if err != nil {
		return 0, nil, fmt.Errorf("witness: reading the answer: %w", err)
	}
	if len(body) > maxResponseSize {
		return 0, nil, fmt.Errorf("witness: the answer is larger than %d bytes", maxResponseSize)
	}
	return resp.StatusCode, body, nil
}

// statusError turns a witness's error status back into the error Add
// returned; notFound is what a 404 means for the endpoint asked.
func statusError(code int, body []byte, notFound error) error {
	var sentinel error
	switch code {
	case http.StatusBadRequest:
		sentinel = ErrBadRequest
	case http.StatusForbidden:
		sentinel = ErrBadSignature
	case http.StatusNotFound:
		sentinel = notFound
	case http.StatusUnprocessableEntity:
		sentinel = ErrBadProof
	default:
		return fmt.Errorf("witness: the witness answered %d %s: %s", code, http.StatusText(code), excerpt(body))
	}
	return fmt.Errorf("%w: the witness answered %d: %s", sentinel, code, excerpt(body))
}

// excerpt quotes the start of a witness's answer for an error message.
func excerpt(b []byte) string {
	const max = 512
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// validCosigLines reports whether b is one or more note signature lines.
func validCosigLines(b []byte) bool {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return false
	}
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "— ") {
			return false
		}
	}
	return true
}
