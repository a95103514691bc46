// Package manifest owns a connector package's manifest.toml: the strict
// parser (Parse), the model of what a package asks for (Manifest), the
// grants a spec reaches (Reach) and the check that a spec stays within its
// manifest (Check). The store calls it at install; it sits beside the store
// and imports only policy (for FQNs, versions, authorities and did-you-mean)
// and the TOML decoder.
package manifest
