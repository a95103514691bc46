package main

import (
	"maps"
	"testing"
)

// TestProxyDetails: a proxy record's audit line carries only the details
// the data plane documents (sni, a turn's end, a misfit's field and rule,
// an asked request's approval and proposal); any other key is dropped.
func TestProxyDetails(t *testing.T) {
	for _, c := range []struct {
		in, want map[string]string
	}{
		{nil, nil},
		{map[string]string{"sni": "other.example.com"}, map[string]string{"sni": "other.example.com"}},
		{map[string]string{"sni": "a.example", "body": "secret"}, map[string]string{"sni": "a.example"}},
		{map[string]string{"authorization": "Bearer x"}, nil},
		{map[string]string{"end": "completed", "text": "hi"}, map[string]string{"end": "completed"}},
		{map[string]string{"field": "body.to", "rule": "pattern", "value": "a@b"}, map[string]string{"field": "body.to", "rule": "pattern"}},
		{map[string]string{"approval_id": "ap_1", "proposal_id": "pr_1", "path": "/x"}, map[string]string{"approval_id": "ap_1", "proposal_id": "pr_1"}},
	} {
		if got := proxyDetails(c.in); !maps.Equal(got, c.want) {
			t.Errorf("proxyDetails(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
