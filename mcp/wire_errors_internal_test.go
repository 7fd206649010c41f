package mcp

import (
	"encoding/json"
	"testing"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// The final response of a request the engine ended without its handler's names
// why in error.data.reason, and carries its sequence number.
func TestEndedResponseReasons(t *testing.T) {
	for cause, want := range map[error]spec.Reason{
		resume.ErrRestarted: spec.ReasonServerRestarted,
		resume.ErrOwnerLost: spec.ReasonOwnerLost,
		resume.ErrStoreLost: spec.ReasonStoreLost,
	} {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Reason spec.Reason       `json:"reason"`
					Meta   map[string]uint64 `json:"_meta"`
				} `json:"data"`
			} `json:"error"`
		}
		raw := endedResponse([]byte(`7`), 12, cause)
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %v in %s", cause, err, raw)
		}
		if string(m.ID) != "7" || m.Error.Code != spec.CodeInvalidParams || m.Error.Data.Reason != want || m.Error.Data.Meta[spec.MetaSeq] != 12 {
			t.Errorf("%v: %s; want id 7, -32602, reason %s, seq 12", cause, raw, want)
		}
	}
}
