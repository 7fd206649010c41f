package mcp

import (
	"context"

	"github.com/mark3labs/mcp-go/server"
)

// CloseStream asks the transport to close the stream the calling tool's messages
// travel on (an SSE response on Streamable HTTP), as a server may do with a
// long-idle stream (SEP-1699): the client reconnects with Last-Event-ID and gets
// the rest, including the result. The tool keeps running. It reports whether there
// was such a stream to close; on stdio and WebSocket there never is.
func CloseStream(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(*callSession)
	if !ok {
		return false
	}
	return cs.cl.closeStream()
}

// closeStream closes the call's stream when its transport has closable streams.
func (cl *call) closeStream() bool { return false }
