package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const grpcSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/grpc", "version": "1.0.0"},
  "tools": [{"name": "grpc", "operations": [
    {"name": "unary", "method": "POST", "path": "/grpc.testing.TestService/UnaryCall", "hosts": ["grpc.test"], "credential": "bearer"},
    {"name": "server.stream", "method": "POST", "path": "/grpc.testing.TestService/StreamingOutputCall", "hosts": ["grpc.test"], "credential": "bearer"},
    {"name": "bidi", "method": "POST", "path": "/grpc.testing.TestService/FullDuplexCall", "hosts": ["grpc.test"], "credential": "bearer"}
  ]}]
}`

// grpcUpstream is a TestService that answers only calls carrying the
// bearer credential, and ends every call with a trailer.
type grpcUpstream struct {
	testgrpc.UnimplementedTestServiceServer
	secret string
	calls  atomic.Int64
}

func (g *grpcUpstream) authorized(ctx context.Context) error {
	g.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer "+g.secret {
		return status.Error(codes.Unauthenticated, "no credential")
	}
	return grpc.SetTrailer(ctx, metadata.Pairs("x-upstream", "done"))
}

func (g *grpcUpstream) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	g.calls.Add(1)
	return &testgrpc.Empty{}, nil
}

func (g *grpcUpstream) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := g.authorized(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: append([]byte("auth ok: "), req.GetPayload().GetBody()...)}}, nil
}

func (g *grpcUpstream) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	if err := g.authorized(st.Context()); err != nil {
		return err
	}
	for i, p := range req.GetResponseParameters() {
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
		if i == 0 {
			time.Sleep(20 * time.Millisecond) // the first message must arrive on its own, not with the rest
		}
	}
	return nil
}

func (g *grpcUpstream) FullDuplexCall(st testgrpc.TestService_FullDuplexCallServer) error {
	if err := g.authorized(st.Context()); err != nil {
		return err
	}
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// grpcThroughProxy is a gRPC client whose connection is a CONNECT tunnel
// through the session's proxy, trusting the session CA.
func grpcThroughProxy(t *testing.T, s *session) *grpc.ClientConn {
	t.Helper()
	u := s.proxyURL(t)
	pw, _ := u.User.Password()
	auth := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", addr, addr, auth)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK || br.Buffered() != 0 {
			_ = c.Close()
			return nil, fmt.Errorf("CONNECT %s: %v %v", addr, resp, err)
		}
		return c, nil
	}
	pem, err := os.ReadFile(s.CACertPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cc, err := grpc.NewClient("passthrough:///grpc.test:443", grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "grpc.test"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestGRPCThroughTheProxy: a real gRPC client and server, h2 on both legs:
// unary, server-streaming and bidirectional calls of allowed operations
// get the credential injected and their trailers intact; a method no
// operation allows is refused with PermissionDenied and never reaches the
// server.
func TestGRPCThroughTheProxy(t *testing.T) {
	dir := t.TempDir()
	cert, rootPath, _, err := newRuntimePKI(dir, []string{"grpc.test"})
	if err != nil {
		t.Fatal(err)
	}
	secret := newSecret("grpc bearer token", "grpc-", "")
	up := &grpcUpstream{secret: secret}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	testgrpc.RegisterTestServiceServer(srv, up)
	lis, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	d := theSuite.startTestDaemon(t, map[string]any{
		"proxy":    map[string]any{"listen": "127.0.0.1:0"},
		"upstream": map[string]any{"resolve": map[string]string{"grpc.test:443": lis.Addr().String()}, "ca_files": []string{rootPath}},
		"egress":   map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
		"admin":    map[string]any{"web_listen": ""},
	}, nil)
	spec := filepath.Join(dir, "grpc.json")
	if err := os.WriteFile(spec, []byte(grpcSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cli(t, "connector", "install", spec)
	if _, stderr, err := d.runInput(t.Context(), secret, "credential", "set", "grpc-bearer", "--kind", "bearer"); err != nil {
		t.Fatalf("credential set: %v\n%s", err, stderr)
	}
	d.cli(t, "credential", "bind", "local://test/grpc", "--credential", "grpc-bearer")
	client := testgrpc.NewTestServiceClient(grpcThroughProxy(t, d.newSession(t, "--name", "grpc")))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	var trailer metadata.MD
	resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hi")}}, grpc.Trailer(&trailer))
	if err != nil || string(resp.GetPayload().GetBody()) != "auth ok: hi" || trailer.Get("x-upstream")[0] != "done" {
		t.Fatalf("unary: %v %v trailer %v", resp, err, trailer)
	}

	ss, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{
		ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}, {Size: 20000}, {Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for {
		m, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("server streaming: %v", err)
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
	if fmt.Sprint(sizes) != "[10 20000 3]" || ss.Trailer().Get("x-upstream")[0] != "done" {
		t.Fatalf("server streaming: sizes %v trailer %v", sizes, ss.Trailer())
	}

	bidi, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // each message answered before the next is sent: the stream is full duplex end to end
		msg := fmt.Sprintf("ping %d", i)
		if err := bidi.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(msg)}}); err != nil {
			t.Fatal(err)
		}
		got, err := bidi.Recv()
		if err != nil || string(got.GetPayload().GetBody()) != msg {
			t.Fatalf("bidi %d: %v %v", i, got, err)
		}
	}
	_ = bidi.CloseSend()
	if _, err := bidi.Recv(); !errors.Is(err, io.EOF) || bidi.Trailer().Get("x-upstream")[0] != "done" {
		t.Fatalf("bidi end: %v trailer %v", err, bidi.Trailer())
	}

	before := up.calls.Load()
	_, err = client.EmptyCall(ctx, &testgrpc.Empty{})
	if status.Code(err) != codes.PermissionDenied || up.calls.Load() != before {
		t.Fatalf("a method no operation allows: %v (upstream calls %d → %d); want PermissionDenied, unsent", err, before, up.calls.Load())
	}
	waitAudit(t, d, "the gRPC decisions", func(lines []auditLine) bool {
		allowed, denied := 0, 0
		for _, l := range lines {
			if l.str("host") != "grpc.test" {
				continue
			}
			switch l.str("decision") {
			case "allow":
				allowed++
			case "deny":
				denied++
			}
		}
		return allowed >= 3 && denied >= 1
	})
}
