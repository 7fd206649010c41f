// Package dial is the one place that says what an MCP server's address means
// and opens a connection to it: an http:// or https:// URL is Streamable HTTP
// (transport/http), a ws:// or wss:// URL is WebSocket (transport/ws), a
// command is a stdio child (transport/stdio). `mcp-resume call`, `status`,
// `task`, `tools`, `login`, the gateway's upstream side (and so `connect`) and
// their tracing all read an address through Parse or Command and connect
// through Endpoint.Dial.
//
// What every connection keeps, whoever dials it: the credentials a caller
// gives (Options.Header, Options.Client's and Options.Wrap's round trippers)
// go to the endpoint's origin only, never through a redirect to another
// (transport.CheckRedirect, transport.SameOriginClient); a stdio child gets
// the environment stdio.Environ allows, never this process's whole one.
package dial
