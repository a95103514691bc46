package dataplane

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxBodyPrefix bounds how much of a request body is read, before
// forwarding, to find the JSON values the record needs (the model a model
// call asks for, body.* audit fields). The bytes read are put back in
// front of the rest, so the body is forwarded whole, whatever its size; a
// value that ends after the first maxBodyPrefix bytes is not found.
const maxBodyPrefix = 1 << 20

// peekBody returns the values at paths ("model", "a.b", "items[0].id")
// found in the start of r's JSON body. The body is parsed as a stream, so
// a value complete before the cut is found even when the body is longer,
// and reading stops once every path is found. Values keep numbers as
// written (json.Number). nil when none is found or there is no body.
func peekBody(r *http.Request, paths []string) map[string]any {
	if len(paths) == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	var buf bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(io.LimitReader(r.Body, maxBodyPrefix), &buf))
	dec.UseNumber()
	w := &jsonWalk{dec: dec, want: make(map[string]bool, len(paths)), inner: map[string]bool{}}
	for _, p := range paths {
		w.want[p] = true
		for i := 1; i < len(p); i++ {
			if p[i] == '.' || p[i] == '[' {
				w.inner[p[:i]] = true
			}
		}
	}
	_ = w.value("") // a body cut short or not JSON keeps what was found before
	r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf.Bytes()), r.Body), Closer: r.Body}
	return w.found
}

// jsonWalk finds wanted paths in a JSON token stream, descending only into
// the objects and arrays that lead to one.
type jsonWalk struct {
	dec   *json.Decoder
	want  map[string]bool // paths to extract
	inner map[string]bool // proper prefixes of a wanted path
	found map[string]any
}

// prefixedBody replays bytes already read in front of the rest of a body.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// errWalkDone ends a walk once every wanted path is found.
var errWalkDone = io.EOF

// value reads the value at path.
func (w *jsonWalk) value(path string) error {
	if w.want[path] {
		var v any
		if err := w.dec.Decode(&v); err != nil {
			return err
		}
		if w.found == nil {
			w.found = make(map[string]any, len(w.want))
		}
		w.found[path] = v
		if len(w.found) == len(w.want) {
			return errWalkDone
		}
		return nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar nobody asked for
	}
	if path != "" && !w.inner[path] {
		return w.skip()
	}
	for i := 0; w.dec.More(); i++ {
		next := path + "[" + strconv.Itoa(i) + "]"
		if d == '{' {
			k, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			next = key
			if path != "" {
				next = path + "." + key
			}
			if strings.ContainsAny(key, ".[") {
				next = "\x00" // a key no path can name
			}
		}
		if err := w.value(next); err != nil {
			return err
		}
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

// skip reads to the end of the object or array just opened.
func (w *jsonWalk) skip() error {
	for depth := 1; depth > 0; {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}
