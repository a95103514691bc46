// Package integration holds Aileron's end-to-end tests. They build the real
// aileron binary, start daemons on loopback, and drive real clients (curl,
// Python urllib and requests, Node, Go) through the proxy to fake upstream
// servers that speak real TLS with the committed test PKI in testdata/pki.
//
// The proxy reaches the fake upstreams only through its configuration
// (upstream.resolve, upstream.ca_files, egress.allow_cidrs); nothing in the
// tests bypasses the daemon's own dialling, verification or policy.
//
// Run with `make test`, which installs the client tools first
// (scripts/test-deps.sh). A missing tool fails the tests; it never skips them.
//
// It may import anything; it drives the daemon binary it builds, as a user
// would, rather than calling into packages.
package integration
