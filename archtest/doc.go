// Package archtest holds no code, only tests that keep the repository's
// shape: the package rules of docs/architecture.md (who may import whom,
// that only the data plane touches goproxy, that stores never import each
// other, and security invariant 7 over everything sandboxapi reaches), the
// closed sets of reasons, event names and refusal classes (it type-checks
// the code), and that git tracks no build output.
package archtest
