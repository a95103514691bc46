package printable

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"plain ascii", "plain ascii", "plain ascii"},
		{"a\x1b[31mred", `a\x1b[31mred`, `a\x1b[31mred`},
		{"l1\r\nl2\tx", `l1\r\nl2\tx`, "l1\\r\nl2\tx"},
		{"\u202eevil\u200b", `\u202eevil\u200b`, `\u202eevil\u200b`},
		{"bad \xff byte", `bad \xff byte`, `bad \xff byte`},
		{"del\x7f nul\x00", `del\x7f nul\x00`, `del\x7f nul\x00`},
		{"c1 \u009b2J \u009dosc", `c1 \u009b2J \u009dosc`, `c1 \u009b2J \u009dosc`},
		{"émoji 🙂 ok", "émoji 🙂 ok", "émoji 🙂 ok"},
		{"hangul\u3164filler\u115f\u1160\uffa0", `hangul\u3164filler\u115f\u1160\uffa0`, `hangul\u3164filler\u115f\u1160\uffa0`},
		{"cgj\u034f vs16\ufe0f khmer\u17b4", `cgj\u034f vs16\ufe0f khmer\u17b4`, `cgj\u034f vs16\ufe0f khmer\u17b4`},
		{"tag\U000e0041 pua\ue000 vs\U000e0100", `tag\U000e0041 pua\ue000 vs\U000e0100`, `tag\U000e0041 pua\ue000 vs\U000e0100`},
		{"ls\u2028ps\u2029nbsp\u00a0", `ls\u2028ps\u2029nbsp\u00a0`, `ls\u2028ps\u2029nbsp\u00a0`},
	} {
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// defaultIgnorable is Unicode's derived Default_Ignorable_Code_Point
// (DerivedCoreProperties.txt): Other_Default_Ignorable_Code_Point + Cf +
// Variation_Selector - White_Space - U+FFF9..U+FFFB (interlinear
// annotation) - U+13430..U+1343F (Egyptian format controls) -
// Prepended_Concatenation_Mark.
func defaultIgnorable(r rune) bool {
	if !unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector) {
		return false
	}
	return !unicode.In(r, unicode.White_Space, unicode.Prepended_Concatenation_Mark) &&
		!(r >= 0xfff9 && r <= 0xfffb) && !(r >= 0x13430 && r <= 0x1343f)
}

// mustEscape says why r must never reach a display as itself ("" when
// nothing says so), by Unicode property.
func mustEscape(r rune) string {
	switch {
	case unicode.Is(unicode.Cc, r):
		return "control (Cc)"
	case unicode.Is(unicode.Cf, r):
		return "format (Cf)"
	case unicode.In(r, unicode.Zl, unicode.Zp):
		return "line or paragraph separator"
	case unicode.Is(unicode.Zs, r) && r != ' ':
		return "a space other than U+0020"
	case defaultIgnorable(r):
		return "Default_Ignorable_Code_Point"
	case unicode.In(r, unicode.Bidi_Control, unicode.Join_Control, unicode.Variation_Selector):
		return "bidi control, joiner or variation selector"
	case unicode.In(r, unicode.Co, unicode.Cs, unicode.Noncharacter_Code_Point):
		return "private use, surrogate or noncharacter"
	case unicode.Is(unicode.C, r): // Go's C holds the unassigned code points (Cn) too
		return "unassigned (Cn)"
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0:
		return "Hangul filler"
	}
	return ""
}

// TestEveryCodePoint goes through every code point: one a property says is
// invisible, a control or direction-changing is Hidden and comes out as a
// printable ASCII escape; every other letter, mark, number, punctuation
// and symbol comes out as itself. (Line runs on runs of 512 code points.)
func TestEveryCodePoint(t *testing.T) {
	var hidden, shown []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		why := mustEscape(r)
		switch {
		case why != "":
			if !Hidden(r) {
				t.Errorf("U+%04X (%s) is not Hidden", r, why)
			}
			hidden = append(hidden, r)
		case r == 0x2800 || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point):
			if !Hidden(r) {
				t.Errorf("U+%04X draws nothing but is not Hidden", r)
			}
			hidden = append(hidden, r)
		case Hidden(r) && r != '\n' && r != '\t':
			t.Errorf("U+%04X %q is a visible character but Hidden", r, string(r))
		case r != '\n' && r != '\t':
			shown = append(shown, r)
		}
	}
	if len(hidden) < 900000 || len(shown) < 140000 { // about 975k hidden (most unassigned or private use) and 150k shown
		t.Fatalf("%d hidden and %d shown code points: the tables look empty", len(hidden), len(shown))
	}
	for i := 0; i < len(hidden); i += 512 {
		run := hidden[i:min(i+512, len(hidden))]
		var b []byte
		for _, r := range run {
			if r >= 0xd800 && r <= 0xdfff { // as a broken encoder writes one (utf8 would make it U+FFFD)
				b = append(b, 0xed, byte(0xa0|(r>>6)&0x1f), byte(0x80|r&0x3f))
			} else {
				b = utf8.AppendRune(b, r)
			}
		}
		s := string(b)
		for _, got := range []string{Line(s), strings.NewReplacer("\n", "", "\t", "").Replace(Text(s))} { // Text keeps those two
			if !asciiPrintable(got) {
				t.Fatalf("U+%04X..U+%04X come out as %q: want printable ASCII escapes", run[0], run[len(run)-1], got)
			}
		}
	}
	for i := 0; i < len(shown); i += 512 {
		s := string(shown[i:min(i+512, len(shown))])
		if got := Line(s); got != s {
			t.Fatalf("visible characters U+%04X.. changed: %q, want %q", shown[i], got, s)
		}
	}
}

func asciiPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// TestScriptsStayReadable: ordinary text of many scripts, and emoji
// without selectors, is shown exactly as it is.
func TestScriptsStayReadable(t *testing.T) {
	for _, s := range []string{
		"Grüße, café, naïve, Ångström, Dvořák, Łódź", "ñ as n + U+0303: n\u0303",
		"日本語の文章です。", "中文测试：你好，世界", "한국어 문장입니다", "العربية: مرحبا بالعالم", "עברית: שלום",
		"Ελληνικά", "Русский текст", "हिन्दी पाठ", "ไทย ภาษา", "ქართული", "አማርኛ", "தமிழ்",
		"emoji 🙂🚀🎉 ✓ → ∑ € £ ¥", "math 𝔸𝕓 𝟙", "punctuation «»“”‘’—–…",
	} {
		if got := Line(s); got != s {
			t.Errorf("Line(%q) = %q: readable text must stay as it is", s, got)
		}
	}
}

func TestClipAndCut(t *testing.T) {
	if c := Clip("abcdef", 4); c != "abcd … 2 more bytes" {
		t.Errorf("Clip = %q", c)
	}
	if c := Clip("a\u202eb", 100); c != `a\u202eb` {
		t.Errorf("Clip = %q", c)
	}
	s := strings.Repeat("é", 10)
	if n := Cut(s, 5); n != 4 {
		t.Errorf("Cut in a rune = %d, want 4", n)
	}
	if n := Cut(s, 100); n != len(s) {
		t.Errorf("Cut of what fits = %d", n)
	}
}

func TestJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"plain","n":1}` + "\n", `{"a":"plain","n":1}` + "\n"},
		{`{"p":"/x` + "\u202e\u009b" + `y"}`, `{"p":"/x\u202e\u009by"}`},
		{`{"k` + "\u3164" + `":"` + "\U000e0041" + `"}`, `{"k\u3164":"\udb40\udc41"}`},
		{`{"q":"\"` + "\u2066" + `\\"}`, `{"q":"\"\u2066\\"}`},
		{"{\"a\":\t\"\x1b\"}\r\n", "{\"a\": \"\\u001b\"} \n"},
		{`{"b":"` + "\xff" + `"}`, `{"b":"\ufffd"}`},
		{`{"ok":"日本 🙂 é"}`, `{"ok":"日本 🙂 é"}`},
	} {
		if got := string(JSON([]byte(tc.in))); got != tc.want {
			t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzJSONKeepsTheValue: for any string, its encoding/json text made
// safe by JSON decodes to the same value and shows no Hidden rune.
func FuzzJSONKeepsTheValue(f *testing.F) {
	for _, s := range []string{"", "plain", "\u202e\u009b\x1b", "\u3164\ufe0f\U000e0001", "\"\\\u2028", "日本🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\ufffd")
		}
		b, err := json.Marshal(map[string]string{s: s})
		if err != nil {
			t.Fatal(err)
		}
		safe := JSON(b)
		var back map[string]string
		if err := json.Unmarshal(safe, &back); err != nil {
			t.Fatalf("JSON(%s) = %s: not JSON: %v", b, safe, err)
		}
		if len(back) != 1 || back[s] != s {
			t.Fatalf("JSON(%s) = %s decodes to %q, want %q", b, safe, back, s)
		}
		for _, r := range string(safe) {
			if Hidden(r) {
				t.Fatalf("JSON(%s) = %s still holds %U", b, safe, r)
			}
		}
	})
}

// TestPrintableWord: the eight-byte check agrees with a byte-wise one for
// every byte value at every position, among printable neighbours and
// among bytes just above the high bit.
func TestPrintableWord(t *testing.T) {
	for _, fill := range []byte{'a', '~', ' ', 0x80} {
		for pos := range 8 {
			for v := range 256 {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(v)
				want := true
				for _, c := range b {
					want = want && c >= 0x20 && c < 0x7f
				}
				if got := printableWord(binary.LittleEndian.Uint64(b[:])); got != want {
					t.Fatalf("printableWord(% x) = %v, want %v", b, got, want)
				}
			}
		}
	}
}
