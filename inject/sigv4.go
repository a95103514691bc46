package inject

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxSignedBody is the largest request body Apply reads to hash for SigV4.
const MaxSignedBody = 8 << 20

// SigV4 payload hash values a client may declare in X-Amz-Content-Sha256.
const (
	unsignedPayload          = "UNSIGNED-PAYLOAD"
	streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	amzContentSHA256         = "X-Amz-Content-Sha256"
)

// isPresignParam reports the query parameters of a presigned SigV4 URL. A
// client request carrying them would present two signatures; they are
// removed.
func isPresignParam(k string) bool {
	switch strings.ToLower(k) {
	case "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-expires",
		"x-amz-signedheaders", "x-amz-signature", "x-amz-security-token":
		return true
	}
	return false
}

// applySigV4 signs out with s (validated, Kind aws_sigv4).
func applySigV4(out *http.Request, s Secret, now time.Time, forms *EchoForms) ([]string, error) {
	host := out.Host
	if host == "" {
		host = out.URL.Host
	}
	region, err := AWSRegion(host)
	if err != nil {
		return nil, err
	}
	if _, err := url.ParseQuery(out.URL.RawQuery); err != nil {
		return nil, fmt.Errorf("%w: aws_sigv4: the request's query string is not well-formed (a bad %%-escape or a ';' separator), so it cannot be signed canonically", ErrBadPlacement)
	}
	declared := strings.TrimSpace(out.Header.Get(amzContentSHA256))
	stripClientSigV4(out)
	payload, err := payloadHash(out, declared)
	if err != nil {
		return nil, err
	}
	out.Header.Set(amzContentSHA256, payload)
	if err := signV4(out, s, region, payload, now); err != nil {
		return nil, err
	}
	e := echoSet{cache: forms}
	e.forms(s.SecretAccessKey)
	e.forms(s.SessionToken)
	return e.list, nil
}

// signV4 adds X-Amz-Date, X-Amz-Security-Token (when s has a session token)
// and Authorization to r with the official AWS signer. It does not add
// X-Amz-Content-Sha256: that is Apply's job, and the AWS test suite's
// vectors are signed without it.
func signV4(r *http.Request, s Secret, region, payload string, now time.Time) error {
	creds := aws.Credentials{
		AccessKeyID:     s.AccessKeyID,
		SecretAccessKey: s.SecretAccessKey,
		SessionToken:    s.SessionToken,
		Source:          "aileron",
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) {
		// S3 signs the path as sent; every other service escapes it again.
		o.DisableURIPathEscaping = s.Service == "s3"
	})
	if err := signer.SignHTTP(context.Background(), creds, r, payload, s.Service, region, now); err != nil {
		return fmt.Errorf("%w: aws_sigv4: signing for service %q in %s failed: %v", ErrBadPlacement, s.Service, region, err)
	}
	return nil
}

// stripClientSigV4 removes every SigV4 artefact the client sent (its own
// signature, date, token, payload hash, presign parameters): Aileron's
// signature replaces them.
func stripClientSigV4(out *http.Request) {
	for k := range out.Header {
		switch strings.ToLower(k) {
		case "authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256":
			delete(out.Header, k)
		}
	}
	if out.URL.RawQuery == "" {
		return
	}
	q := out.URL.Query()
	removed := false
	for k := range q {
		if isPresignParam(k) {
			delete(q, k)
			removed = true
		}
	}
	if removed {
		out.URL.RawQuery = q.Encode()
	}
}

// payloadHash returns the payload hash to sign: the declared unsigned
// marker, or the hex SHA-256 of the body, which it buffers (bounded) and
// puts back re-readable.
func payloadHash(out *http.Request, declared string) (string, error) {
	switch {
	case declared == unsignedPayload || declared == streamingUnsignedTrailer:
		return declared, nil
	case strings.HasPrefix(declared, "STREAMING-"):
		return "", fmt.Errorf("%w: aws_sigv4: the client sent a %s body whose chunks it signed itself; Aileron cannot re-sign aws-chunked uploads, so configure the SDK for unsigned payloads over HTTPS or a plain body", ErrBadPlacement, declared)
	}
	body, err := readBounded(out)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// readBounded reads out's body (at most MaxSignedBody bytes), closes it, and
// replaces it with a re-readable copy of known length.
func readBounded(out *http.Request) ([]byte, error) {
	if out.Body == nil || out.Body == http.NoBody {
		return nil, nil
	}
	if out.ContentLength > MaxSignedBody {
		_ = out.Body.Close()
		return nil, fmt.Errorf("%w: aws_sigv4: the %d-byte request body exceeds the %d MiB Aileron buffers to hash for signing; for S3 send X-Amz-Content-Sha256: UNSIGNED-PAYLOAD or use a multipart upload",
			ErrBodyTooLarge, out.ContentLength, MaxSignedBody>>20)
	}
	body, err := io.ReadAll(io.LimitReader(out.Body, MaxSignedBody+1))
	_ = out.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("aws_sigv4: reading the request body to hash it: %w", err)
	}
	if len(body) > MaxSignedBody {
		return nil, fmt.Errorf("%w: aws_sigv4: the request body exceeds the %d MiB Aileron buffers to hash for signing; for S3 send X-Amz-Content-Sha256: UNSIGNED-PAYLOAD or use a multipart upload",
			ErrBodyTooLarge, MaxSignedBody>>20)
	}
	out.ContentLength = int64(len(body))
	out.TransferEncoding = nil // the signed Content-Length goes on the wire
	if len(body) == 0 {
		out.Body = http.NoBody
		out.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		return body, nil
	}
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return body, nil
}

// AWSRegion derives the SigV4 signing region from an AWS endpoint host
// (an optional port is ignored):
//
//	<service>.<region>.amazonaws.com[.cn], also with more labels in front
//	  (abc123.execute-api.eu-west-1.amazonaws.com, bucket.s3.us-west-2…,
//	  s3.dualstack.ap-south-1…)                                → <region>
//	<bucket>.s3-<region>.amazonaws.com (legacy dash form)      → <region>
//	s3.amazonaws.com, <bucket>.s3.amazonaws.com,
//	s3-external-1.amazonaws.com                                → us-east-1
//	<service>.amazonaws.com (global endpoints: iam, sts, …)    → us-east-1
//
// Any other host is an error wrapping ErrBadPlacement.
func AWSRegion(host string) (string, error) {
	h := strings.ToLower(host)
	if hp, _, err := net.SplitHostPort(h); err == nil {
		h = hp
	}
	h = strings.TrimSuffix(h, ".")
	rest, global := strings.CutSuffix(h, ".amazonaws.com")
	if !global {
		var ok bool
		if rest, ok = strings.CutSuffix(h, ".amazonaws.com.cn"); !ok {
			rest = ""
		}
	}
	if rest != "" {
		labels := strings.Split(rest, ".")
		last := labels[len(labels)-1]
		switch {
		case len(labels) >= 2 && isRegion(last):
			return last, nil
		case strings.HasPrefix(last, "s3-") && isRegion(last[3:]):
			return last[3:], nil
		case global && (last == "s3" || last == "s3-external-1" || len(labels) == 1 && !isRegion(last)):
			return "us-east-1", nil
		}
	}
	return "", fmt.Errorf("%w: aws_sigv4: cannot derive an AWS region from host %q; expected <service>.<region>.amazonaws.com (e.g. sqs.eu-west-1.amazonaws.com) or <bucket>.s3.<region>.amazonaws.com",
		ErrBadPlacement, host)
}

// isRegion reports whether s looks like an AWS region name: a 2-4 letter
// prefix, one or more letter words, and a number ("us-east-1",
// "us-gov-west-1", "eusc-de-east-1").
func isRegion(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 3 || len(parts[0]) < 2 || len(parts[0]) > 4 {
		return false
	}
	for _, p := range parts[:len(parts)-1] {
		if p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz") != "" {
			return false
		}
	}
	n := parts[len(parts)-1]
	return n != "" && len(n) <= 2 && strings.Trim(n, "0123456789") == ""
}
