package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.2:8443", "address to serve on")
	rootOut := flag.String("root-out", ".demo/upstream-root.pem", "where to write the root certificate")
	keyOut := flag.String("key-out", ".demo/api.key", "where to write the API key this API accepts (mode 0600)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("api.demo.test: ")
	cert, rootPEM, err := mint("api.demo.test")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen) // first: the files say it is up
	if err != nil {
		log.Fatal(err)
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		log.Fatal(err)
	}
	a := &api{key: "demo_" + hex.EncodeToString(key), greetings: []greeting{{"1", "hello"}, {"2", "bonjour"}}}
	if err := os.WriteFile(*keyOut, []byte(a.key), 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*rootOut, rootPEM, 0o644); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	log.Printf("serving https://api.demo.test on %s", *listen)
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

type greeting struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// api is the greetings API: it wants its key, and counts what it creates.
type api struct {
	key       string
	mu        sync.Mutex
	greetings []greeting
	created   int
}

func (a *api) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/greetings", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		reply(w, http.StatusOK, map[string]any{"greetings": a.greetings, "authorized": true})
	})
	mux.HandleFunc("GET /v1/greetings/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "text": "hello", "authorized": true})
	})
	mux.HandleFunc("POST /v1/greetings", func(w http.ResponseWriter, r *http.Request) {
		var g greeting
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&g); err != nil || g.Text == "" {
			reply(w, http.StatusBadRequest, map[string]string{"error": `want {"text": "..."}`})
			return
		}
		a.mu.Lock()
		a.created++
		g.ID = strconv.Itoa(len(a.greetings) + 1)
		a.greetings = append(a.greetings, g)
		n := a.created
		a.mu.Unlock()
		reply(w, http.StatusCreated, map[string]any{"id": g.ID, "text": g.Text, "authorized": true, "creates_received": n})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]string{"note": "the demo upstream answers everything; the proxy decides what reaches it"})
	})
	return a.keyed(mux)
}

// keyed logs every request it receives, and answers 401 to one without
// the API's key.
func (a *api) keyed(next http.Handler) http.Handler {
	want := []byte("Bearer " + a.key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			log.Printf("received %s %s without the API key: 401", r.Method, r.URL.Path)
			reply(w, http.StatusUnauthorized, map[string]string{"error": "no valid API key in Authorization: Bearer KEY"})
			return
		}
		log.Printf("received %s %s with the API key", r.Method, r.URL.Path)
		next.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// mint makes a root and a leaf for host, valid for a day.
func mint(host string) (tls.Certificate, []byte, error) {
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	root := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Aileron demo upstream root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, root, root, &rootKey.PublicKey, rootKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}), nil
}
