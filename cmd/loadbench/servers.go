package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"

	mcpgoserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/servers/demo"
)

// serveSelf serves the target kind ("-serve-floor", "-serve-mcpgo") on addr
// until the process is killed.
func serveSelf(kind, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	switch kind {
	case "-serve-floor":
		return http.Serve(ln, floor{})
	case "-serve-mcpgo":
		return http.Serve(ln, mcpgoserver.NewStreamableHTTPServer(demo.Server("loadbench")))
	}
	return fmt.Errorf("unknown %s", kind)
}

// floor answers what a round sends with as little as an SSE server over
// net/http can do: no session bookkeeping, no MCP library, each message
// marshalled with encoding/json and flushed as its own event. What a real
// server adds shows against it.
type floor struct{}

type floorRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Text  string `json:"text"`
			Steps int    `json:"steps"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

type floorMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
}

type floorText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req floorRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if req.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", "floor")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(floorMessage{JSONRPC: "2.0", ID: req.ID, Result: map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "floor", "version": "1"},
		}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	send := func(m floorMessage) {
		b, _ := json.Marshal(m)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		fl.Flush()
	}
	text := req.Params.Arguments.Text
	if req.Params.Name == "countdown" {
		steps := req.Params.Arguments.Steps
		for i := 1; i <= steps; i++ {
			send(floorMessage{JSONRPC: "2.0", Method: "notifications/progress", Params: map[string]any{
				"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": steps,
				"message": "step " + strconv.Itoa(i) + " of " + strconv.Itoa(steps),
			}})
		}
		text = fmt.Sprintf("countdown done: %d of %d steps", steps, steps)
	}
	send(floorMessage{JSONRPC: "2.0", ID: req.ID, Result: map[string]any{"content": []floorText{{"text", text}}}})
}
