// Command upstream is the demo's stand-in for a real API on the internet: a
// TLS server for api.demo.test with a certificate from a throwaway root that
// it writes to --root-out, so the daemon can be told to trust it
// (upstream.ca_files) without weakening verification.
//
// Like a real API it wants a key: it makes one at start and writes it to
// --key-out (mode 0600), the key its dashboard would show you. A request
// without that key in "Authorization: Bearer KEY" is answered 401. It logs
// every request it receives to stderr, so the demo can show what reached
// it and how often.
package main
