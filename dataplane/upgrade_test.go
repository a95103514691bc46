package dataplane

import (
	"errors"
	"net/http"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

func TestUpgradeChecks(t *testing.T) {
	ws := &policy.Operation{FQN: "local://t/ws", Version: "1.0.0", Tool: "t", Spec: &policy.OperationSpec{Name: "ws", Method: "GET", WebSocket: true}}
	plain := &policy.Operation{FQN: "local://t/ws", Version: "1.0.0", Tool: "t", Spec: &policy.OperationSpec{Name: "get", Method: "GET"}}
	for _, tc := range []struct {
		name    string
		method  string
		hdr     http.Header
		op      *policy.Operation
		refused bool
	}{
		{"no upgrade", "GET", http.Header{}, plain, false},
		{"websocket opted in", "GET", http.Header{"Upgrade": {"websocket"}}, ws, false},
		{"websocket any case", "GET", http.Header{"Upgrade": {" WebSocket "}}, ws, false},
		{"websocket not opted in", "GET", http.Header{"Upgrade": {"websocket"}}, plain, true},
		{"websocket on POST", "POST", http.Header{"Upgrade": {"websocket"}}, ws, true},
		{"websocket on the API host", "GET", http.Header{"Upgrade": {"websocket"}}, nil, true},
		{"websocket and another", "GET", http.Header{"Upgrade": {"websocket, foo"}}, ws, true},
		{"two lines", "GET", http.Header{"Upgrade": {"websocket", "websocket"}}, ws, true},
		{"h2c", "GET", http.Header{"Upgrade": {"h2c"}}, ws, true},
		{"other", "GET", http.Header{"Upgrade": {"TLS/1.2"}}, ws, true},
		{"empty value", "GET", http.Header{"Upgrade": {""}}, ws, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{Method: tc.method, Header: tc.hdr}
			err := checkUpgrade(r, tc.op)
			if (err != nil) != tc.refused {
				t.Fatalf("checkUpgrade = %v, want refused %v", err, tc.refused)
			}
			var de *DenyError
			if err != nil && (!errors.As(err, &de) || de.Reason != policy.ReasonUpgradeRefused) {
				t.Fatalf("refusal %v is not upgrade_refused", err)
			}
		})
	}
}

func TestH2CIsRefusedBeforePolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hdr     http.Header
		refused bool
	}{
		{"none", http.Header{}, false},
		{"websocket", http.Header{"Upgrade": {"websocket"}}, false},
		{"h2c", http.Header{"Upgrade": {"h2c"}}, true},
		{"h2c upper", http.Header{"Upgrade": {"foo, H2C"}}, true},
		{"h2c second line", http.Header{"Upgrade": {"websocket", "h2c"}}, true},
		{"settings alone", http.Header{"Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := h2cUpgrade(&http.Request{Header: tc.hdr}); (err != nil) != tc.refused {
				t.Fatalf("h2cUpgrade = %v, want refused %v", err, tc.refused)
			}
		})
	}
}
