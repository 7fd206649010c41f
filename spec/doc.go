// Package spec holds the wire types and constants of SEP-975 ("transport-agnostic
// resumable requests") as mcp-resume implements it, plus this project's extensions
// (sequence numbers, acknowledgements, stable error reasons).
//
// It is the innermost package: it knows JSON-RPC 2.0 and the shapes of the messages,
// nothing about connections, engines or stores. README.md beside this file is the
// protocol as implemented, with the reason for every decision the SEP leaves open.
package spec
