package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The gRPC rows call grpc-go's interop TestService on an upstream of its
// own (grpc-go's server, not net/http's), directly and through the
// daemon, which injects the bench credential as the x-api-key metadata.
// The direct client sends the key itself, so both do the same work.
const (
	grpcUnary  = "unary"  // UnaryCall, one answer message
	grpcStream = "stream" // StreamingOutputCall, grpcStreamMsgs answer messages
)

// grpcStreamMsgs is how many messages one streaming call receives.
const grpcStreamMsgs = 100

// grpcUpstream is the TestService: every call must carry apiKey.
type grpcUpstream struct {
	testgrpc.UnimplementedTestServiceServer
	apiKey string
}

func (g *grpcUpstream) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-api-key"); len(v) != 1 || subtle.ConstantTimeCompare([]byte(v[0]), []byte(g.apiKey)) != 1 {
		return status.Error(codes.Unauthenticated, "x-api-key is missing or wrong: the proxy did not inject the bench credential")
	}
	return nil
}

func (g *grpcUpstream) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := g.check(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: make([]byte, req.GetResponseSize())}}, nil
}

func (g *grpcUpstream) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	if err := g.check(st.Context()); err != nil {
		return err
	}
	for _, p := range req.GetResponseParameters() {
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

// startGRPC serves the TestService on ip:0 over TLS with leaf and returns
// its address and a stop function.
func startGRPC(ip string, leaf tls.Certificate, apiKey string) (string, func(), error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", nil, fmt.Errorf("gRPC upstream: %w", err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12})))
	testgrpc.RegisterTestServiceServer(srv, &grpcUpstream{apiKey: apiKey})
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv.Stop, nil
}

// grpcClient connects to addr (host:port), through proxy when it is set
// (a CONNECT tunnel with the session's credentials), trusting roots.
func grpcClient(addr string, proxy *url.URL, roots *x509.CertPool) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))}
	if proxy != nil {
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, target string) (net.Conn, error) {
			return connectThrough(ctx, proxy, target)
		}))
	}
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

// connectThrough opens a CONNECT tunnel to target through proxy.
func connectThrough(ctx context.Context, proxy *url.URL, target string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", proxy.Host)
	if err != nil {
		return nil, err
	}
	pw, _ := proxy.User.Password()
	auth := base64.StdEncoding.EncodeToString([]byte(proxy.User.Username() + ":" + pw))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err == nil && (resp.StatusCode != http.StatusOK || br.Buffered() != 0) {
		err = fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// grpcLoad is what a gRPC client process sends: conc calls of kind at a
// time, answered with size-byte messages, with the x-api-key key (empty
// when the proxy injects it).
type grpcLoad struct {
	kind, key  string
	size, conc int
}

// grpcCall makes one call of load's kind and checks what comes back.
func grpcCall(ctx context.Context, tc testgrpc.TestServiceClient, load grpcLoad) error {
	size := int32(load.size)
	if load.kind == grpcUnary {
		resp, err := tc.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: size})
		if err == nil && len(resp.GetPayload().GetBody()) != int(size) {
			err = fmt.Errorf("unary: %d bytes, want %d", len(resp.GetPayload().GetBody()), size)
		}
		return err
	}
	params := make([]*testgrpc.ResponseParameters, grpcStreamMsgs)
	for i := range params {
		params[i] = &testgrpc.ResponseParameters{Size: size}
	}
	st, err := tc.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		return err
	}
	for got := 0; ; got++ {
		_, err := st.Recv()
		switch {
		case errors.Is(err, io.EOF) && got == grpcStreamMsgs:
			return nil
		case errors.Is(err, io.EOF):
			return fmt.Errorf("stream: %d messages, want %d", got, grpcStreamMsgs)
		case err != nil:
			return err
		}
	}
}
