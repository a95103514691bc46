// Package fence wires fenced sandboxes (aileron sandbox run) on Linux: for
// each one a veth pair from the daemon's network namespace into the
// sandbox's, addresses and a single route to Aileron, an nftables fence on
// both ends installed over netlink (inside: only Aileron's DNS and
// transparent listeners, everything else rejected at once and logged; on
// the daemon's end: redirection to the transparent listeners, nothing
// forwarded; on both, a packet whose source the sandbox does not own is
// dropped, never answered), the sandbox's policy DNS server (policydns),
// its transparent listeners (dataplane.ServeTransparent), and the audit of
// every blocked attempt read back from NFLOG. Gateways (Attach) get the
// same for clients on another network. Each sandbox's listeners get their
// own dataplane.Origins: a connection must come from that sandbox's
// address, and its session is that sandbox's. Everything it creates is
// removed when the sandbox's process exits, when the daemon stops, and by
// Sweep at the next start after a crash.
package fence
