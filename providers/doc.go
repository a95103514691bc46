// Package providers owns the model providers shipped with Aileron: their
// connector packages, embedded in the binary (Anthropic, OpenAI, the Gemini
// API), the connector spec generated for an OpenAI-compatible provider at a
// host the user names, and the table other code reads to know a provider:
// its name, FQN, hosts, vault entry, the variables that carry its key
// placeholder and the one that names its base URL.
//
// A shipped package is an ordinary connector package: the CLI writes it to
// a directory (WritePackage) and installs it through the store's normal
// install path, with the same validation and content hashing as any other.
// Whether a provider is ready (installed and bound) is worked out from
// what the admin API lists (Facts.Status).
//
// It imports policy only.
package providers
