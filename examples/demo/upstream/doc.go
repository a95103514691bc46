// Command upstream is the demo's stand-in for a real API on the internet: a
// TLS server for api.demo.test with a certificate from a throwaway root that
// it writes to --root-out, so the daemon can be told to trust it
// (upstream.ca_files) without weakening verification.
package main
