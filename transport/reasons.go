package transport

import "github.com/mcp-resume/mcp-resume/spec"

// Reasons (error.data.reason) of the answers the network transports give
// before a message reaches the core. (The core's are in package spec.)
const (
	// ReasonTooManyConnections: a connection refused at a ConnLimit bound.
	ReasonTooManyConnections spec.Reason = "too_many_connections"
	// ReasonRequestTimeout: an HTTP request whose body did not arrive in time.
	ReasonRequestTimeout spec.Reason = "request_timeout"
)
