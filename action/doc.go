// Package action parses, validates and resolves action manifests: the
// actions/<name>/action.md files of a connector package that chain
// connector operations into one named, agent-facing tool.
//
// A manifest is a Markdown file that starts with a line "+++", followed by
// TOML front matter, a closing line "+++" and a Markdown body, which is the
// action's description:
//
//	+++
//	name = "comment-create"
//	version = "1.0.0"
//
//	[[requires.connectors]]
//	name = "github://acme/aileron-connector-linear"
//	version = "1.0.0"
//	hash = "self"
//	capabilities = ["network:api.linear.app:443", "credential:oauth2"]
//
//	[[execute]]
//	id = "issue"
//	connector = "github://acme/aileron-connector-linear"
//	op = "get-issue"
//	inputs = { id = "${args.issueId}" }
//
//	[[execute]]
//	id = "comment"
//	connector = "github://acme/aileron-connector-linear"
//	op = "comment-create"
//	inputs = { id = "${issue.id}", body = "${args.body}" }
//
//	[[inputs]]
//	name = "issueId"
//	type = "String"
//
//	[[inputs]]
//	name = "body"
//	multiline = true
//	+++
//	Comments on a Linear issue.
//
// Parse rejects unknown keys, so a misspelt key such as "requried" is an
// error rather than a silently ignored setting. Manifests come from
// third-party packages: Parse bounds their size (MaxManifestSize), nesting
// and dotted-key depth, and the number of problems it reports. Inputs are required unless
// they say required = false; an input without a type is a "string".
//
// Step inputs may hold templates: ${args.NAME} is the action argument NAME
// and ${STEP.FIELD[.FIELD…]} a field of the decoded output of an earlier
// step (a numeric FIELD indexes an array). ${args} and ${STEP} alone stand
// for all arguments and the whole output. A string that is exactly one
// template takes the referenced value with its JSON type; a template inside
// a longer string is replaced by the value's text (strings as they are,
// anything else as JSON). "$${" writes a literal "${". A step without an
// inputs table passes the action's arguments to its operation unchanged
// (an empty table sends none). Parse checks that ${args.NAME} names a
// declared input and ${STEP…} an earlier step; the approval preview may
// only use ${args…}.
//
// A requirement pins its connector by hash. The package that holds the
// action cannot name its own hash (the hash covers the action file), so a
// requirement on it writes hash = "self" and its version: it is pinned by
// containment. A requirement on another connector names that package's
// installed hash "sha256:<64 hex>"; a placeholder such as
// "sha256:bound-at-release" leaves it unpinned (Manifest.Unpinned), which
// the store accepts only when asked to. A requirement's capabilities are
// the part of the connector's grants the action uses, each written
// "network:HOST:PORT", "credential:KIND" or "scope:SCOPE" (Requirement.Caps).
//
// LoadPackage reads every manifest of a package, checks the pins above and
// resolves each step against the package's connector spec (ResolveStep),
// refusing a step whose operation needs a host:port or credential kind
// outside its requirement's capabilities; Catalog is the immutable
// set of installed actions the daemon serves.
//
// Values returned by this package are read-only once built and safe for
// concurrent use.
//
// It imports policy and a TOML parser, nothing of the data or control plane.
package action
