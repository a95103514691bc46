package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/aileronhq/aileron/credentials"
)

// SetCredential stores (or rotates) a vault entry; the answer never holds
// the secret.
func (c *Client) SetCredential(ctx context.Context, req SetCredentialRequest) (credentials.Info, error) {
	var info credentials.Info
	err := c.do(ctx, http.MethodPost, "/v1/credentials", req, &info)
	return info, err
}

// ListCredentials lists vault entries without their values.
func (c *Client) ListCredentials(ctx context.Context) ([]credentials.Info, error) {
	var out credentialList
	err := c.do(ctx, http.MethodGet, "/v1/credentials", nil, &out)
	return out.Credentials, err
}

// DeleteCredential removes a vault entry.
func (c *Client) DeleteCredential(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/credentials/"+url.PathEscape(name), nil, nil)
}

// Bind ties a connector to a vault entry (replacing its previous binding).
func (c *Client) Bind(ctx context.Context, b credentials.Binding) (credentials.Binding, error) {
	var out credentials.Binding
	err := c.do(ctx, http.MethodPost, "/v1/bindings", b, &out)
	return out, err
}

// ListBindings lists every binding.
func (c *Client) ListBindings(ctx context.Context) ([]credentials.Binding, error) {
	var out bindingList
	err := c.do(ctx, http.MethodGet, "/v1/bindings", nil, &out)
	return out.Bindings, err
}

// Unbind removes a connector's binding.
func (c *Client) Unbind(ctx context.Context, fqn string) error {
	return c.do(ctx, http.MethodPost, "/v1/bindings/remove", UnbindRequest{Connector: fqn}, nil)
}

// LoginApp returns the OAuth app connector fqn's manifest declares, without
// its client secret; name, when set, is checked as a credential name.
func (c *Client) LoginApp(ctx context.Context, fqn, name string) (LoginApp, error) {
	var out LoginApp
	err := c.do(ctx, http.MethodPost, "/v1/credentials/login/app", LoginAppRequest{Connector: fqn, Name: name}, &out)
	return out, err
}

// Login has the daemon redeem an authorization code, store the token set
// and bind it; the answer never holds a token.
func (c *Client) Login(ctx context.Context, req LoginRequest) (LoginResult, error) {
	var out LoginResult
	err := c.do(ctx, http.MethodPost, "/v1/credentials/login", req, &out)
	return out, err
}
