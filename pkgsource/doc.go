// Package pkgsource fetches and unpacks connector package archives: a
// gzip'd tar read from a file or from an https URL, or found for a
// reference FQN@VERSION in the configured sources (a GitHub or GitLab
// release under a base URL, or a local mirror directory).
//
// Unpacking is as strict as the store: only regular files and directories,
// no absolute or escaping paths, no duplicate entries, and bounded sizes and
// counts, so a hostile archive fails before it fills a disk. Fetching
// dials through the SSRF guard the proxy uses, verifies TLS, and refuses
// plain http at every hop.
//
// It does not install: it leaves a package directory for the store to
// install, and it never imports the store.
package pkgsource
