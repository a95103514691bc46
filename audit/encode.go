package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aileronhq/aileron/printable"
)

// appendTail appends the part of ev's line that follows its chain head
// (time, seq, prev_hash): `,"event":…}` and the newline. The bytes are
// exactly those encoding/json (HTML escaping off) writes for the same
// fields, without reflection; the maps fall back to encoding/json.
// It runs outside the log's lock.
func appendTail(b []byte, ev *Event) ([]byte, error) {
	b = append(b, `,"event":`...)
	b = appendString(b, string(ev.Name))
	for _, f := range [...]struct{ k, v string }{
		{"node", ev.Node}, {"audit_id", ev.AuditID}, {"run_id", ev.RunID}, {"parent_audit_id", ev.ParentAuditID},
		{"session", ev.Session}, {"client", ev.Client}, {"method", ev.Method}, {"host", ev.Host},
	} {
		b = appendStringField(b, f.k, f.v)
	}
	b = appendIntField(b, "port", int64(ev.Port))
	for _, f := range [...]struct{ k, v string }{
		{"path", ev.Path}, {"decision", ev.Decision}, {"reason", ev.Reason}, {"connector", ev.Connector},
		{"connector_version", ev.ConnectorVersion}, {"connector_hash", ev.ConnectorHash}, {"tool", ev.Tool},
		{"operation", ev.Operation},
	} {
		b = appendStringField(b, f.k, f.v)
	}
	b = appendIntField(b, "status", int64(ev.Status))
	b = appendIntField(b, "upstream_status", int64(ev.UpstreamStatus))
	b = appendIntField(b, "bytes_in", ev.BytesIn)
	b = appendIntField(b, "bytes_out", ev.BytesOut)
	var err error
	if b, err = appendFloatField(b, "duration_ms", ev.DurationMS); err != nil {
		return nil, err
	}
	if b, err = appendFloatField(b, "upstream_ms", ev.UpstreamMS); err != nil {
		return nil, err
	}
	b = appendStringField(b, "model", ev.Model)
	if ev.Streamed {
		b = append(b, `,"streamed":true`...)
	}
	b = appendIntField(b, "input_tokens", ev.InputTokens)
	b = appendIntField(b, "output_tokens", ev.OutputTokens)
	b = appendIntField(b, "cached_tokens", ev.CachedTokens)
	if b, err = appendFloatField(b, "ttfb_ms", ev.TTFBMS); err != nil {
		return nil, err
	}
	if len(ev.Fields) > 0 {
		if b, err = appendJSON(b, "fields", ev.Fields); err != nil {
			return nil, err
		}
	}
	if len(ev.Details) > 0 {
		if b, err = appendJSON(b, "details", ev.Details); err != nil {
			return nil, err
		}
	}
	return append(b, "}\n"...), nil
}

// appendHead appends the chain head: `{"time":…,"seq":…,"prev_hash":…`.
func appendHead(b []byte, t time.Time, seq uint64, prev string) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, errors.New("event time year outside [0,9999]")
	}
	b = append(b, `{"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"prev_hash":`...)
	return appendString(b, prev), nil
}

func appendStringField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	b = append(append(append(b, ",\""...), k...), "\":"...)
	return appendString(b, v)
}

func appendIntField(b []byte, k string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(append(append(b, ",\""...), k...), "\":"...)
	return strconv.AppendInt(b, v, 10)
}

// appendFloatField formats as encoding/json does: 'f' form, or 'e' (with
// a one-digit negative exponent) below 1e-6 and from 1e21.
func appendFloatField(b []byte, k string, f float64) ([]byte, error) {
	if f == 0 {
		return b, nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New(k + " is not a finite number")
	}
	b = append(append(append(b, ",\""...), k...), "\":"...)
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// appendJSON appends a map field through encoding/json (sorted keys, no
// HTML escaping, Hidden runes escaped as appendString does), the one part
// of a line that is not fixed.
func appendJSON(b []byte, k string, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b = append(append(append(b, ",\""...), k...), "\":"...)
	return append(b, printable.JSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))...), nil
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does with HTML escaping off
// ('"', '\\' and control bytes escaped, invalid UTF-8 as U+FFFD, and
// U+2028/U+2029 escaped), and every other rune printable.Hidden names
// escaped too (\u202e): the same JSON value, safe to show as it is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start, fastFrom := 0, 0
	for i := 0; i < len(s); {
		if i >= fastFrom { // most of a line: printable ASCII, eight bytes at a time
			if i = plainPrefix(s, i); i == len(s) {
				break
			}
			fastFrom = i + 8 // the word at i needs a look at each byte
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if printable.Hidden(r) { // U+2028 and U+2029 as encoding/json, and U+202E, C1 controls, …
			b = append(b, s[start:i]...)
			b = printable.AppendJSONEscape(b, r)
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// plainPrefix returns where the run of plain 8-byte words of s from i
// ends (see plainWord): i itself when the word there is not plain or
// fewer than 8 bytes are left.
func plainPrefix(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if !plainWord(w) {
			break
		}
	}
	return i
}

// plainWord says whether the 8 bytes of w all stand for themselves in a
// JSON string: printable ASCII other than '"' and '\\' (a byte below 0x20,
// DEL, the two specials or any byte of a multi-byte rune makes it false).
func plainWord(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	ctl := (w - 0x20*lo) &^ w & hi // some byte < 0x20 (exact while no byte is >= 0x80)
	quote := w ^ '"'*lo
	slash := w ^ '\\'*lo
	del := w ^ 0x7f*lo
	special := ((quote-lo)&^quote | (slash-lo)&^slash | (del-lo)&^del) & hi // some byte is '"', '\\' or DEL
	return (w&hi)|ctl|special == 0
}
