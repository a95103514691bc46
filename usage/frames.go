package usage

import "errors"

// The WebSocket opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
)

// errFrame is a frame sequence that breaks RFC 6455; the reader stops.
var errFrame = errors.New("usage: not a valid WebSocket frame sequence")

// frames reads one direction of a WebSocket connection as bytes arrive:
// it parses frame heads, unmasks payloads (a client's frames are masked)
// and feeds each text message's payload to onData, then calls onEnd when
// the message's last frame ends. Control frames, binary messages and
// compressed messages (RSV1) are skipped. Its memory is fixed: a frame's
// payload is never held, whatever length its head announces.
type frames struct {
	head    [14]byte
	nh      int    // head bytes read
	left    uint64 // payload bytes left in the current frame
	inFrame bool
	mask    [4]byte
	masked  bool
	pos     uint64 // payload offset in the frame, for the mask
	control bool   // the current frame is a control frame
	fin     bool
	inMsg   bool // a data message started and has not ended
	read    bool // the current message is a text message that is read
	err     error
	scratch [512]byte

	onData func(p []byte) // unmasked payload of a text message
	onEnd  func()         // a text message ended
	onHead func()         // a data frame's head was read (the first byte of an answer)
}

// write reads p; after an error it reads nothing more.
func (f *frames) write(p []byte) {
	for len(p) > 0 && f.err == nil {
		if !f.inFrame {
			p = f.readHead(p)
			continue
		}
		n := uint64(len(p))
		if n > f.left {
			n = f.left
		}
		f.payload(p[:n])
		p = p[n:]
		f.left -= n
		if f.left == 0 {
			f.endFrame()
		}
	}
}

// headLen is the length of a head whose first two bytes are b0, b1.
func headLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// readHead consumes head bytes from p and returns the rest.
func (f *frames) readHead(p []byte) []byte {
	for len(p) > 0 {
		if f.nh < 2 || f.nh < headLen(f.head[1]) {
			f.head[f.nh] = p[0]
			f.nh++
			p = p[1:]
			continue
		}
		break
	}
	if f.nh < 2 || f.nh < headLen(f.head[1]) {
		return p
	}
	f.startFrame()
	return p
}

// startFrame checks a complete head and starts its payload.
func (f *frames) startFrame() {
	h := f.head[:f.nh]
	f.nh = 0
	b0, b1 := h[0], h[1]
	f.fin, f.masked = b0&0x80 != 0, b1&0x80 != 0
	op := b0 & 0x0f
	size, rest := uint64(b1&0x7f), h[2:]
	switch size {
	case 126:
		size, rest = uint64(rest[0])<<8|uint64(rest[1]), rest[2:]
	case 127:
		size = 0
		for _, b := range rest[:8] {
			size = size<<8 | uint64(b)
		}
		rest = rest[8:]
		if size>>63 != 0 {
			f.err = errFrame
			return
		}
	}
	if f.masked {
		copy(f.mask[:], rest[:4])
	}
	f.left, f.pos, f.control = size, 0, op&0x8 != 0
	switch {
	case f.control:
		if op > 0xA || size > 125 || !f.fin {
			f.err = errFrame
			return
		}
	case op == opContinuation:
		if !f.inMsg {
			f.err = errFrame
			return
		}
	case op == opText || op == opBinary:
		if f.inMsg {
			f.err = errFrame
			return
		}
		f.inMsg = true
		f.read = op == opText && b0&0x40 == 0 // RSV1: compressed, unreadable here
		if f.onHead != nil {
			f.onHead()
		}
	default:
		f.err = errFrame
		return
	}
	f.inFrame = true
	if size == 0 {
		f.endFrame()
	}
}

// payload handles payload bytes of the current frame.
func (f *frames) payload(p []byte) {
	if f.control || !f.read {
		f.pos += uint64(len(p))
		return
	}
	if !f.masked {
		f.onData(p)
		f.pos += uint64(len(p))
		return
	}
	for len(p) > 0 {
		n := copy(f.scratch[:], p)
		for i := 0; i < n; i++ {
			f.scratch[i] ^= f.mask[(f.pos+uint64(i))&3]
		}
		f.onData(f.scratch[:n])
		f.pos += uint64(n)
		p = p[n:]
	}
}

// endFrame ends the current frame, and its message when it was the last.
func (f *frames) endFrame() {
	f.inFrame = false
	if f.control || !f.fin {
		return
	}
	if f.read {
		f.onEnd()
	}
	f.inMsg, f.read = false, false
}
