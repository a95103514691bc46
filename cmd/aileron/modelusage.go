package main

import (
	"github.com/aileronhq/aileron/dataplane"
	modelusage "github.com/aileronhq/aileron/usage"
)

// usageReader is the daemon's dataplane.Usage: the usage package's
// readers, in the data plane's types.
type usageReader struct{ r modelusage.Reader }

func (u usageReader) Answer(api, contentType string) dataplane.AnswerUsage {
	if a := u.r.Answer(api, contentType); a != nil {
		return answerUsage{a}
	}
	return nil
}

func (u usageReader) Socket(api string, turn func(dataplane.Turn)) dataplane.SocketUsage {
	s := u.r.Socket(api, func(t modelusage.Turn) {
		turn(dataplane.Turn{Model: t.Model, Tokens: dataplane.Tokens(t.Tokens), Reported: t.Reported, End: t.End,
			Started: t.Started, FirstByte: t.FirstByte})
	})
	if s == nil {
		return nil
	}
	return s
}

type answerUsage struct{ a *modelusage.Answer }

func (a answerUsage) Observe(p []byte) { a.a.Observe(p) }

func (a answerUsage) Tokens() (dataplane.Tokens, bool) {
	t, ok := a.a.Tokens()
	return dataplane.Tokens(t), ok
}
