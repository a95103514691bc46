package dataplane

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// rawHello builds a TLS 1.2 ClientHello naming sni (none when "") with the
// extra extensions given (type → data).
func rawHello(sni string, extra map[uint16][]byte) []byte {
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	var ext []byte
	if sni != "" {
		name := append([]byte{0}, u16(nil, len(sni))...)
		name = append(name, sni...)
		list := append(u16(nil, len(name)), name...)
		ext = append(u16(u16(ext, 0), len(list)), list...)
	}
	for typ, data := range extra {
		ext = append(u16(u16(ext, int(typ)), len(data)), data...)
	}
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)    // random
	body = append(body, 0)                      // session id
	body = append(body, 0, 2, 0xc0, 0x2f, 1, 0) // one suite, null compression
	body = append(u16(body, len(ext)), ext...)  // extensions
	hs := append([]byte{1, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append(append([]byte{0x16, 3, 1}, u16(nil, len(hs))...), hs...)
}

// echOuter is an outer encrypted_client_hello extension: type outer, HKDF-
// SHA256 and AES-128-GCM, config id 1, a 32-byte enc and a 16-byte payload.
func echOuter() []byte {
	b := []byte{0, 0, 1, 0, 1, 1, 0, 32}
	b = append(b, make([]byte, 32)...)
	b = append(b, 0, 16)
	return append(b, make([]byte, 16)...)
}

func TestPeekHello(t *testing.T) {
	a := policy.Authority{Host: "pass.example", Port: 443}
	for _, tc := range []struct {
		name  string
		hello []byte
		ok    bool
	}{
		{"names the host", rawHello("pass.example", nil), true},
		{"names it in another case", rawHello("PASS.Example", nil), true},
		{"fronts another host", rawHello("other.example", nil), false},
		{"names none", rawHello("", nil), false},
		{"encrypted client hello", rawHello("pass.example", map[uint16][]byte{extECH: echOuter()}), false},
		{"not TLS", []byte("GET / HTTP/1.1\r\nHost: pass.example\r\n\r\n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			defer server.Close()
			go func() { _, _ = client.Write(tc.hello) }()
			h := peekHello(server, 2*time.Second)
			err := helloMismatch(h, a)
			if (err == nil) != tc.ok {
				t.Fatalf("helloMismatch = %v (hello %+v), want ok %v", err, clientHello{name: h.name, ech: h.ech}, tc.ok)
			}
			var de *DenyError
			if err != nil && (!errors.As(err, &de) || de.Reason != policy.ReasonAuthorityMismatch) {
				t.Errorf("refusal %v is not authority_mismatch", err)
			}
			if tc.name == "encrypted client hello" && (!h.ech || h.name != "pass.example") {
				t.Errorf("ECH hello read as %+v, want the extension seen", clientHello{name: h.name, ech: h.ech})
			}
			if len(h.raw) == 0 || string(h.raw) != string(tc.hello[:len(h.raw)]) {
				t.Errorf("peekHello kept %d bytes that are not the client's", len(h.raw))
			}
		})
	}
}
