package e2etest

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
)

// eraCheck holds what the client sent, by id, to check each answer against the
// revision its request spoke: an answer to a request of the 2025 era (no
// envelope in its _meta) may carry only the members 2025-11-25 defines for its
// method (and SEP-975's), never one of 2026-07-28's. The check runs on every
// message the client reads, so every test of the suite makes it.
type eraCheck struct {
	mu   sync.Mutex
	sent map[string]string // a 2025-era request's raw id -> its method
}

// result2025 lists, per method, the members of a result that 2025-11-25 (and
// SEP-975, for resumable requests) defines. A method not listed is not checked.
var result2025 = map[string][]string{
	"initialize":               {"protocolVersion", "capabilities", "serverInfo", "instructions"},
	"ping":                     {},
	"tools/list":               {"tools", "nextCursor"},
	"tools/call":               {"content", "structuredContent", "isError", "task"},
	"resources/list":           {"resources", "nextCursor"},
	"resources/templates/list": {"resourceTemplates", "nextCursor"},
	"resources/read":           {"contents"},
	"resources/subscribe":      {},
	"resources/unsubscribe":    {},
	"prompts/list":             {"prompts", "nextCursor"},
	"prompts/get":              {"description", "messages"},
	"completion/complete":      {"completion"},
	"logging/setLevel":         {},
	"tasks/get":                {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"},
	"tasks/cancel":             {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"},
	"tasks/list":               {"tasks", "nextCursor"},
}

// meta2025 lists the io.modelcontextprotocol/ keys of _meta that 2025-11-25
// defines; the rest of that prefix is 2026-07-28's (the envelope, serverInfo).
var meta2025 = []string{"io.modelcontextprotocol/related-task", "io.modelcontextprotocol/model-immediate-response"}

// sending records msg, a message the client writes.
func (e *eraCheck) sending(msg []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.ID) == 0 || m.Method == "" {
		return
	}
	if _, modern := m.Params.Meta["io.modelcontextprotocol/protocolVersion"]; modern {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sent == nil {
		e.sent = map[string]string{}
	}
	if _, inFlight := e.sent[string(m.ID)]; inFlight {
		return // a request sent again under an id in flight keeps the first one's
	}
	switch m.Method {
	case "requests/resume", "tasks/result":
		// Answered with the result of the call it resumes (same id), or of
		// the task: a tools/call's.
		e.sent[string(m.ID)] = "tools/call"
	default:
		e.sent[string(m.ID)] = m.Method
	}
}

// received checks m, a message the client read.
func (e *eraCheck) received(t testing.TB, m Msg) {
	if m.Method != "" || len(m.ID) == 0 {
		return
	}
	if len(m.Result) == 0 || m.Result[0] != '{' { // an error ends the request too
		e.mu.Lock()
		delete(e.sent, string(m.ID))
		e.mu.Unlock()
		return
	}
	e.mu.Lock()
	method, ok := e.sent[string(m.ID)]
	delete(e.sent, string(m.ID))
	e.mu.Unlock()
	if !ok {
		return
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(m.Result, &members) != nil {
		return
	}
	allowed, listed := result2025[method]
	for k, v := range members {
		if k == "_meta" {
			var meta map[string]json.RawMessage
			_ = json.Unmarshal(v, &meta)
			for mk := range meta {
				if strings.HasPrefix(mk, "io.modelcontextprotocol/") && !slices.Contains(meta2025, mk) {
					t.Errorf("the answer to a 2025-era %s carries _meta[%q], which 2025-11-25 does not define: %s", method, mk, m.Raw)
				}
			}
			continue
		}
		if listed && !slices.Contains(allowed, k) {
			t.Errorf("the answer to a 2025-era %s carries %q, which 2025-11-25 does not define: %s", method, k, m.Raw)
		}
	}
}
