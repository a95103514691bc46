package admin

import (
	"context"
	"net/http"

	"github.com/aileronhq/aileron/store"
)

// Trust sets authority's allowed signers to the allowed_signers text
// (source names the file in errors), replacing any it had.
func (c *Client) Trust(ctx context.Context, authority, source string, allowedSigners []byte) (store.TrustedAuthority, error) {
	var out store.TrustedAuthority
	err := c.do(ctx, http.MethodPost, "/v1/trust",
		TrustRequest{Authority: authority, AllowedSigners: string(allowedSigners), Source: source}, &out)
	return out, err
}

// TrustList lists the trust store's authorities and their signers.
func (c *Client) TrustList(ctx context.Context) ([]store.TrustedAuthority, error) {
	var out trustList
	err := c.do(ctx, http.MethodGet, "/v1/trust", nil, &out)
	return out.Authorities, err
}

// Untrust removes authority from the trust store.
func (c *Client) Untrust(ctx context.Context, authority string) error {
	return c.do(ctx, http.MethodPost, "/v1/trust/remove", UntrustRequest{Authority: authority}, nil)
}
