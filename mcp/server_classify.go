package mcp

import "github.com/mcp-resume/mcp-resume/spec"

// Class is what a transport needs to know of a client message to carry it,
// without knowing MCP's methods.
type Class struct {
	// Modern: a request of the 2026-07-28 era. It needs no session; on HTTP its
	// headers are checked with Server.CheckHeaders.
	Modern bool
	// Opens: the request opens a 2025-era session (initialize).
	Opens bool
	// Streams: the answer may take long and may be reconnected to, so a
	// transport with reconnectable streams should start its stream at once (a
	// 2025-era tools/call).
	Streams bool
	// Resume: requests/resume, to which a transport's own acknowledgement
	// applies (Session.HandleResume).
	Resume bool
}

// Classify returns the class of a decoded client message.
func Classify(m *spec.Message) Class {
	if m.Kind != spec.KindRequest {
		return Class{}
	}
	if m.Envelope().Modern() {
		return Class{Modern: true, Resume: m.Method == spec.MethodResume}
	}
	return Class{
		Opens:   m.Method == spec.MethodInitialize,
		Streams: m.Method == spec.MethodToolsCall,
		Resume:  m.Method == spec.MethodResume,
	}
}
