package pkgsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aileronhq/aileron/dataplane"
)

// Fetch defaults.
const (
	// DefaultTimeout bounds one fetch, redirects and body included.
	DefaultTimeout = 5 * time.Minute
	// MaxArchiveSize bounds the bytes of one archive as fetched.
	MaxArchiveSize = MaxTotalSize
	// maxRedirects bounds how many https redirects one fetch follows.
	maxRedirects = 5
)

// ErrNotFound is wrapped when a source does not have what was asked for
// (an https answer 404 or 410, or no file in a mirror).
var ErrNotFound = errors.New("not found")

// Fetcher fetches package archives over https. It dials through Guard, so
// a fetch reaches only what the proxy itself may (upstream.resolve and
// egress.allow_cidrs apply), verifies TLS against RootCAs, and follows a
// redirect only to another https URL.
type Fetcher struct {
	// Guard dials every connection; nil means a zero dataplane.Guard
	// (the system resolver, no private or special-purpose address).
	Guard *dataplane.Guard
	// RootCAs verify servers; nil means the system roots.
	RootCAs *x509.CertPool
	// Timeout bounds one fetch; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxSize bounds the bytes of one archive; zero means MaxArchiveSize.
	MaxSize int64
}

// Unpack fetches the .tar.gz at rawURL, which must be https, and unpacks
// it into dir as Unpack does. A 404 or 410 answer wraps ErrNotFound; an
// archive over MaxArchiveSize bytes wraps ErrInvalidArchive.
func (f *Fetcher) Unpack(ctx context.Context, rawURL, dir string) (root string, err error) {
	body, err := f.open(ctx, rawURL)
	if err != nil {
		return "", err
	}
	defer body.Close()
	limit := f.MaxSize
	if limit <= 0 {
		limit = MaxArchiveSize
	}
	return Unpack(&capReader{r: body, left: limit, limit: limit, url: rawURL}, dir)
}

// open GETs rawURL and returns its body once the answer is 200. Closing
// the body ends the fetch and its connections.
func (f *Fetcher) open(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	client, tr := f.client()
	done := func() { cancel(); tr.CloseIdleConnections() }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		done()
		return nil, fetchError(rawURL, err)
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		done()
		return nil, fetchError(rawURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		done()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
			return nil, fmt.Errorf("fetching %s: %w (%s)", rawURL, ErrNotFound, resp.Status)
		}
		return nil, fmt.Errorf("fetching %s: the server answered %s", rawURL, resp.Status)
	}
	return doneCloser{resp.Body, done}, nil
}

// fetchError is a failed GET of rawURL. net/http's *url.Error repeats the
// URL, so only its cause is kept (with the URL a redirect led to, when it
// led elsewhere and the cause does not say); a certificate no configured root vouches for gets a hint.
func fetchError(rawURL string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
		if ue.URL != rawURL && !strings.Contains(ue.Err.Error(), ue.URL) {
			err = fmt.Errorf("at %s: %w", ue.URL, ue.Err)
		}
	}
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return fmt.Errorf("fetching %s: %w; if this source is meant to be trusted, add its root certificate to upstream.ca_files", rawURL, err)
	}
	return fmt.Errorf("fetching %s: %w", rawURL, err)
}

// client is the http.Client of one fetch: no proxy from the environment,
// dials through the guard, TLS verified, https redirects only, and the
// archive's bytes as sent (no transparent decompression).
func (f *Fetcher) client() (*http.Client, *http.Transport) {
	guard := f.Guard
	if guard == nil {
		guard = &dataplane.Guard{}
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         guard.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: f.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 30 * time.Second,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if err := CheckURL(req.URL.String()); err != nil {
				return fmt.Errorf("redirected from %s: %w", via[len(via)-1].URL, err)
			}
			return nil
		},
	}, tr
}

// CheckURL accepts an https URL with a host and no user name or password.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %v", rawURL, err)
	case u.Scheme == "http":
		return fmt.Errorf("%s is plain http; packages are fetched over https only (TLS verified)", rawURL)
	case u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("%q is not an https URL such as https://github.com/acme/gmail/releases/download/v1.2.3/gmail-1.2.3.tar.gz", rawURL)
	case u.User != nil:
		return fmt.Errorf("%s carries a user name or password; packages are fetched without credentials", u.Redacted())
	}
	return nil
}

// doneCloser ends a fetch when its body is closed.
type doneCloser struct {
	io.ReadCloser
	done func()
}

func (c doneCloser) Close() error {
	err := c.ReadCloser.Close()
	c.done()
	return err
}

// capReader fails once an archive passes limit bytes (left is what
// remains).
type capReader struct {
	r           io.Reader
	left, limit int64
	url         string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, c.tooBig()
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, c.tooBig()
	}
	return n, err
}

func (c *capReader) tooBig() error {
	return fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidArchive, c.url, c.limit)
}
