// Package policydns answers a fenced sandbox's DNS queries from its
// session's policy. It answers only single-question IN A and AAAA queries,
// only for names the session may reach, and only with synthetic addresses
// (Map) that the transparent listeners map back to the name. Every other
// name is refused without being sent anywhere: the server has no upstream
// resolver at all. Other types get no data, so no TXT channel, no ECH
// config (HTTPS/SVCB) and no NULL records reach the sandbox. Queries are
// rate-limited, and each refusal is reported (Denial) with the name cut
// and hashed, since a name can carry data out.
package policydns
