package usage

import "testing"

// FuzzAnswer: any stream of bytes, in any pieces, reads without panic, in
// fixed memory, and the pieces do not change what is read.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{anthropicSSE, openaiChatSSE, openaiResponsesSSE, geminiSSE, anthropicJSON, geminiArray, "data: {\"usage\":\n\n", "\r\r\n:x\n"} {
		f.Add([]byte(s), uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, step uint8, sse bool) {
		ctype := "application/json"
		if sse {
			ctype = "text/event-stream"
		}
		for _, api := range []string{Anthropic, OpenAI, Gemini} {
			whole := (Reader{}).Answer(api, ctype)
			whole.Observe(b)
			split := (Reader{}).Answer(api, ctype)
			n := int(step%16) + 1
			for i := 0; i < len(b); i += n {
				split.Observe(b[i:min(i+n, len(b))])
			}
			w, wr := whole.Tokens()
			s, sr := split.Tokens()
			if w != s || wr != sr {
				t.Fatalf("%s: whole %+v %v, split %+v %v", api, w, wr, s, sr)
			}
			if cap(whole.sc.capBuf) > 2*maxCapture || cap(whole.sc.keyBuf) > maxKey {
				t.Fatalf("buffers grew past their bounds")
			}
		}
	})
}

// FuzzFrames: the WebSocket frame reader takes any bytes, either way, in
// any pieces, without panic, and the pieces do not change the turns.
func FuzzFrames(f *testing.F) {
	f.Add(clientText(wsCreate), cat(text(wsCreated), text(wsCompleted)), uint8(1))
	f.Add(cat(frame(false, false, opText, []byte(wsCreate[:9]), key), frame(true, false, opContinuation, []byte(wsCreate[9:]), key)),
		frame(true, false, 0x9, nil, nil), uint8(4))
	f.Add([]byte{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, []byte{0x88, 0x7e, 0, 200}, uint8(2))
	f.Fuzz(func(t *testing.T, client, upstream []byte, step uint8) {
		run := func(n int) []Turn {
			var got []Turn
			s := (Reader{}).Socket(OpenAI, func(tu Turn) { got = append(got, tu) })
			for i := 0; i < len(client); i += n {
				s.FromClient(client[i:min(i+n, len(client))])
			}
			for i := 0; i < len(upstream); i += n {
				s.FromUpstream(upstream[i:min(i+n, len(upstream))])
			}
			s.Close()
			return got
		}
		whole, split := run(len(client)+len(upstream)+1), run(int(step%16)+1)
		if len(whole) != len(split) {
			t.Fatalf("whole %d turns, split %d", len(whole), len(split))
		}
		for i := range whole {
			a, b := whole[i], split[i]
			if a.Model != b.Model || a.Tokens != b.Tokens || a.End != b.End || a.Reported != b.Reported {
				t.Fatalf("turn %d: whole %+v, split %+v", i, a, b)
			}
		}
	})
}
