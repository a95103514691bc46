package inject

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS Signature Version 4 test suite's credentials and time
// (docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html).
const (
	suiteAccessKey = "AKIDEXAMPLE"
	suiteSecret    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	suiteTime      = "20150830T123600Z"
	emptySHA256    = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

func TestSigV4TestSuite(t *testing.T) {
	now, err := time.Parse("20060102T150405Z", suiteTime)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="
	tests := []struct {
		name, url, sig string
	}{
		{"get-vanilla", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			region, err := AWSRegion(r.URL.Host)
			if err != nil || region != "us-east-1" {
				t.Fatalf("AWSRegion(%q) = %q, %v", r.URL.Host, region, err)
			}
			s := Secret{Kind: KindSigV4, AccessKeyID: suiteAccessKey, SecretAccessKey: suiteSecret, Service: "service"}
			if err := signV4(r, s, region, emptySHA256, now); err != nil {
				t.Fatal(err)
			}
			if got := r.Header.Get("Authorization"); got != prefix+tc.sig {
				t.Errorf("Authorization\n got %s\nwant %s", got, prefix+tc.sig)
			}
			if got := r.Header.Get("X-Amz-Date"); got != suiteTime {
				t.Errorf("X-Amz-Date = %q", got)
			}
		})
	}
}

func TestAWSRegion(t *testing.T) {
	tests := []struct{ host, want string }{
		{"sqs.eu-west-1.amazonaws.com", "eu-west-1"},
		{"sqs.eu-west-1.amazonaws.com:443", "eu-west-1"},
		{"abc123.execute-api.ap-southeast-2.amazonaws.com", "ap-southeast-2"},
		{"my-bucket.s3.us-west-2.amazonaws.com", "us-west-2"},
		{"s3.dualstack.ap-south-1.amazonaws.com", "ap-south-1"},
		{"dynamodb.us-gov-west-1.amazonaws.com", "us-gov-west-1"},
		{"s3.cn-north-1.amazonaws.com.cn", "cn-north-1"},
		{"my-bucket.s3-eu-west-1.amazonaws.com", "eu-west-1"},
		{"s3.amazonaws.com", "us-east-1"},
		{"my-bucket.s3.amazonaws.com", "us-east-1"},
		{"S3.AmazonAWS.com.", "us-east-1"},
		{"sts.amazonaws.com", "us-east-1"},
		{"us-east-1.amazonaws.com", ""},    // a region alone names no service
		{"ab-cd-1.foo.amazonaws.com", ""},  // a bucket-like label is not a region
		{"bucket.s3.amazonaws.com.cn", ""}, // no global endpoint in China
		{"amazonaws.com", ""},
		{"example.com", ""},
		{"sqs.eu-west-1.amazonaws.com.evil.com", ""},
		{"127.0.0.1:8080", ""},
	}
	for _, tc := range tests {
		got, err := AWSRegion(tc.host)
		if tc.want == "" {
			if !errors.Is(err, ErrBadPlacement) {
				t.Errorf("AWSRegion(%q) = %q, %v; want ErrBadPlacement", tc.host, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("AWSRegion(%q) = %q, %v; want %q", tc.host, got, err, tc.want)
		}
	}
}

// sigv4Verifier is an upstream that recomputes every request's signature
// with the official signer from what arrived on the wire.
type sigv4Verifier struct {
	t       *testing.T
	secret  Secret
	gotBody chan []byte
}

func (v *sigv4Verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.gotBody <- body
	if msg := v.verify(r, body); msg != "" {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (v *sigv4Verifier) verify(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return "no SignedHeaders in " + auth
	}
	signed, _, _ = strings.Cut(signed, ",")
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if sum := sha256.Sum256(body); payload != hex.EncodeToString(sum[:]) && payload != unsignedPayload {
		return "X-Amz-Content-Sha256 does not match the body"
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "bad X-Amz-Date"
	}
	region, err := AWSRegion(r.Host)
	if err != nil {
		return err.Error()
	}
	re, _ := http.NewRequest(r.Method, "https://"+r.Host+r.RequestURI, nil)
	re.ContentLength = r.ContentLength
	for h := range strings.SplitSeq(signed, ";") {
		if h != "host" && h != "content-length" {
			re.Header[textproto.CanonicalMIMEHeaderKey(h)] = r.Header.Values(h)
		}
	}
	s := v.secret
	err = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = s.Service == "s3" }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken},
		re, payload, s.Service, region, when)
	if err != nil {
		return err.Error()
	}
	if want := re.Header.Get("Authorization"); want != auth {
		return "signature mismatch:\n got " + auth + "\nwant " + want
	}
	return ""
}

// sigv4Case is one request signed by Apply and checked by a sigv4Verifier.
type sigv4Case struct {
	name       string
	secret     Secret
	method     string
	host, path string
	body       string
	hdr        map[string]string
	wantSigned []string
	wantAbsent []string // headers that must not be sent
	unsigned   bool
}

func TestApplySigV4EndToEnd(t *testing.T) {
	base := Secret{Kind: KindSigV4, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: suiteSecret, Service: "execute-api"}
	withToken := base
	withToken.SessionToken = "FwoGZXIvYXdzEXAMPLETOKEN//session+token="
	s3 := base
	s3.Service = "s3"
	tests := []sigv4Case{
		{name: "GET", secret: base, method: "GET", host: "abc.execute-api.us-east-1.amazonaws.com", path: "/prod/items?b=2&a=1",
			wantSigned: []string{"host", "x-amz-content-sha256", "x-amz-date"}, wantAbsent: []string{"X-Amz-Security-Token"}},
		{name: "POST body and session token", secret: withToken, method: "POST", host: "abc.execute-api.eu-west-1.amazonaws.com", path: "/prod/items",
			body: `{"name":"x"}`, hdr: map[string]string{"Content-Type": "application/json"},
			wantSigned: []string{"content-length", "content-type", "x-amz-security-token"}},
		{name: "client signature replaced", secret: base, method: "GET", host: "abc.execute-api.us-east-1.amazonaws.com",
			path:       "/prod/?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIDFAKE&keep=1",
			hdr:        map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDFAKE/x", "X-Amz-Security-Token": "placeholder", "X-Amz-Date": "20000101T000000Z"},
			wantAbsent: []string{"X-Amz-Security-Token"}},
		{name: "s3 path not double-escaped", secret: s3, method: "PUT", host: "bucket.s3.us-west-2.amazonaws.com", path: "/dir/a%20b+c.txt",
			body: "hello", wantSigned: []string{"x-amz-content-sha256"}},
		{name: "s3 unsigned payload streams", secret: s3, method: "PUT", host: "bucket.s3.us-west-2.amazonaws.com", path: "/big.bin",
			body: "streamed body", hdr: map[string]string{"X-Amz-Content-Sha256": unsignedPayload}, unsigned: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSigV4Case(t, tc) })
	}
}

// runSigV4Case signs one request with Apply, sends it to a verifier and
// checks what arrived.
func runSigV4Case(t *testing.T, tc sigv4Case) {
	v := &sigv4Verifier{t: t, secret: tc.secret, gotBody: make(chan []byte, 1)}
	srv := httptest.NewServer(v)
	defer srv.Close()
	var body io.Reader
	if tc.body != "" {
		body = io.MultiReader(strings.NewReader(tc.body)) // unknown length, as a proxied body
	}
	out, err := http.NewRequest(tc.method, srv.URL+tc.path, body)
	if err != nil {
		t.Fatal(err)
	}
	out.Host = tc.host
	for k, val := range tc.hdr {
		out.Header.Set(k, val)
	}
	echoes, err := Apply(out, Placement{}, tc.secret, time.Now())
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if tc.unsigned && out.GetBody != nil {
		t.Errorf("an UNSIGNED-PAYLOAD body was buffered")
	}
	auth := out.Header.Get("Authorization")
	for _, h := range tc.wantSigned {
		if !strings.Contains(auth, h) {
			t.Errorf("SignedHeaders lack %s: %s", h, auth)
		}
	}
	if strings.Contains(out.URL.RawQuery, "X-Amz-") || strings.Contains(tc.path, "keep=1") && out.URL.RawQuery != "keep=1" {
		t.Errorf("query after signing = %q; want the client's presign parameters gone and the rest kept", out.URL.RawQuery)
	}
	for _, h := range tc.wantAbsent {
		if v := out.Header.Values(h); len(v) != 0 {
			t.Errorf("header %s = %q; the client's value must be gone", h, v)
		}
	}
	resp, err := srv.Client().Do(out)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upstream refused the signature: %s", msg)
	}
	if got := <-v.gotBody; string(got) != tc.body {
		t.Errorf("upstream got body %q, want %q", got, tc.body)
	}
	for _, want := range []string{tc.secret.SecretAccessKey, tc.secret.SessionToken} {
		if want != "" && !slices.Contains(echoes, want) {
			t.Errorf("echoes lack a secret form")
		}
	}
	if slices.Contains(echoes, tc.secret.AccessKeyID) {
		t.Errorf("the access key id is among the echoes")
	}
}

func TestApplySigV4Errors(t *testing.T) {
	s := Secret{Kind: KindSigV4, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: suiteSecret, Service: "s3"}
	big := func() io.Reader { return io.MultiReader(bytes.NewReader(make([]byte, MaxSignedBody+1))) }
	tests := []struct {
		name   string
		host   string
		body   func() io.Reader
		length int64
		hdr    string
		want   error
	}{
		{name: "unparseable host", host: "storage.example.com", want: ErrBadPlacement},
		{name: "body too large, unknown length", host: "s3.amazonaws.com", body: big, length: -1, want: ErrBodyTooLarge},
		{name: "body too large, declared", host: "s3.amazonaws.com", body: big, length: MaxSignedBody + 1, want: ErrBodyTooLarge},
		{name: "client-signed chunks", host: "s3.amazonaws.com", hdr: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", want: ErrBadPlacement},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := httptest.NewRequest(http.MethodPut, "https://"+tc.host+"/key", nil)
			out.RequestURI = ""
			if tc.body != nil {
				out.Body = io.NopCloser(tc.body())
				out.ContentLength = tc.length
			}
			if tc.hdr != "" {
				out.Header.Set(amzContentSHA256, tc.hdr)
			}
			_, err := Apply(out, Placement{}, s, time.Now())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), suiteSecret) {
				t.Errorf("error contains the secret")
			}
		})
	}
}

func TestApplySigV4ExactBodyLimit(t *testing.T) {
	s := Secret{Kind: KindSigV4, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: suiteSecret, Service: "s3"}
	body := bytes.Repeat([]byte("a"), MaxSignedBody)
	out, _ := http.NewRequest(http.MethodPut, "https://s3.amazonaws.com/b/k", io.MultiReader(bytes.NewReader(body)))
	if _, err := Apply(out, Placement{}, s, time.Now()); err != nil {
		t.Fatalf("a body of exactly MaxSignedBody bytes: %v", err)
	}
	sum := sha256.Sum256(body)
	if out.Header.Get(amzContentSHA256) != hex.EncodeToString(sum[:]) || out.ContentLength != MaxSignedBody {
		t.Fatalf("payload hash or length wrong")
	}
	for range 2 { // the body is re-readable
		rc, _ := out.GetBody()
		got, _ := io.ReadAll(rc)
		if !bytes.Equal(got, body) {
			t.Fatal("GetBody returned a different body")
		}
	}
}
