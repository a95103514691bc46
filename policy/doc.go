// Package policy is Aileron's security core for connector specs: the
// aileron.connector.v1 model and its validation (ParseSpec), the canonical
// forms the proxy applies to every request (CanonicalHost, ParseAuthority,
// CheckPath), one immutable matcher compiled from every installed spec
// (Compile), the decision function run on every request (Policy.Decide,
// Policy.DecideConnect), and the check of a matched request's arguments
// against its operation's JSON Schema, compiled once at Compile
// (Operation.CheckArguments).
//
// Matching is exact: a request matches an operation when its canonical
// host and port equal one of the operation's hosts (port 443 when the spec
// names none), its method equals the operation's method, and its path,
// taken as sent, matches the operation's path pattern. Patterns use the
// syntax of Go's net/http: a literal segment matches itself (compared after
// unescaping the request segment once), {name} matches one non-empty
// segment and {name...}, allowed only as the last segment, matches the rest
// of the path, which may be empty. When several patterns match, the one with
// a literal at the first differing segment wins over {name}, which wins over
// {name...}. Two operations that would match the same requests equally are
// rejected. Paths that are not canonical (dot segments, empty segments,
// encoded slashes, backslashes, NUL or control characters, raw or
// percent-encoded) are denied, never normalised.
//
// Every type in this package is safe for concurrent use once built; a
// compiled *Policy never changes, and Holder swaps policies atomically.
//
// Arguments are one JSON object (path variables, query parameters, body
// fields) checked with santhosh-tekuri/jsonschema (draft 2020-12, formats
// asserted, Go's linear-time regexp, nothing loaded from outside the
// schema); a spec's schemas are refused at install when their check could
// not run in time bounded by the request's size.
//
// It imports the standard library, x/net/idna and the JSON Schema library,
// nothing of Aileron: every other package speaks its vocabulary
// (decisions, the closed Reason set).
package policy
