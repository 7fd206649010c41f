package spec_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

var (
	tokenAtLimit = strings.Repeat("t", spec.MaxTokenLen)
	tokenTooLong = strings.Repeat("t", spec.MaxTokenLen+1)
)

// paramsErrorCases are params every token-carrying method rejects.
var paramsErrorCases = []struct{ name, in string }{
	{"missing", ``},
	{"null", `null`},
	{"array", `["tok"]`},
	{"empty array", `[]`},
	{"string", `"tok"`},
	{"number", `1`},
	{"not JSON", `{"resumeToken":`},
	{"empty object", `{}`},
	{"token null", `{"resumeToken":null,"requestId":1}`},
	{"token empty", `{"resumeToken":"","requestId":1}`},
	{"token a number", `{"resumeToken":12,"requestId":1}`},
	{"token an object", `{"resumeToken":{"t":"x"},"requestId":1}`},
	{"token an array", `{"resumeToken":["x"],"requestId":1}`},
	{"token too long", `{"resumeToken":"` + tokenTooLong + `","requestId":1}`},
	{"ack negative", `{"resumeToken":"tok","requestId":1,"_meta":{"io.mcp-resume/ack":-1}}`},
	{"ack a string", `{"resumeToken":"tok","requestId":1,"_meta":{"io.mcp-resume/ack":"3"}}`},
	{"_meta not an object", `{"resumeToken":"tok","requestId":1,"_meta":[1]}`},
}

func wantInvalidParams(t *testing.T, e *spec.Error, method string) {
	t.Helper()
	if e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonInvalidParams {
		t.Errorf("error = %d %q, want %d %q", e.Code, e.Reason, spec.CodeInvalidParams, spec.ReasonInvalidParams)
	}
	if !strings.Contains(e.Message, method) {
		t.Errorf("error message %q does not name %s", e.Message, method)
	}
	if strings.Contains(e.Message, tokenTooLong) {
		t.Errorf("error message carries the token: %.60q...", e.Message)
	}
}

func TestDecodeResumeParams(t *testing.T) {
	ack := func(n uint64) *uint64 { return &n }
	tests := []struct {
		name  string
		in    string
		token string
		ack   *uint64
	}{
		{"token only", `{"resumeToken":"tok"}`, "tok", nil},
		{"token at the limit", `{"resumeToken":"` + tokenAtLimit + `"}`, tokenAtLimit, nil},
		{"unicode token", `{"resumeToken":"tøk✓"}`, "tøk✓", nil},
		{"with ack", `{"resumeToken":"tok","_meta":{"io.mcp-resume/ack":5}}`, "tok", ack(5)},
		{"with ack 0", `{"resumeToken":"tok","_meta":{"io.mcp-resume/ack":0}}`, "tok", ack(0)},
		{"_meta without ack", `{"resumeToken":"tok","_meta":{"other":1}}`, "tok", nil},
		{"unknown fields ignored", `{"resumeToken":"tok","extra":[1,2]}`, "tok", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, e := spec.DecodeResumeParams(json.RawMessage(tt.in))
			if e != nil {
				t.Fatalf("DecodeResumeParams(%s): %v", tt.in, e)
			}
			if p.ResumeToken != tt.token {
				t.Errorf("ResumeToken = %q, want %q", p.ResumeToken, tt.token)
			}
			var got *uint64
			if p.Meta != nil {
				got = p.Meta.Ack
			}
			if (got == nil) != (tt.ack == nil) || (got != nil && *got != *tt.ack) {
				t.Errorf("ack = %v, want %v", got, tt.ack)
			}
		})
	}
	for _, tt := range paramsErrorCases {
		t.Run("error/"+tt.name, func(t *testing.T) {
			p, e := spec.DecodeResumeParams(json.RawMessage(tt.in))
			if e == nil {
				t.Fatalf("DecodeResumeParams(%.80s) = %+v, want an error", tt.in, p)
			}
			if p != nil {
				t.Errorf("params returned with the error: %+v", p)
			}
			wantInvalidParams(t, e, spec.MethodResume)
		})
	}
}

func TestDecodeGetStatusParams(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		id    string
		token string
	}{
		{"number id", `{"requestId":7,"resumeToken":"tok"}`, `7`, "tok"},
		{"string id", `{"requestId":"abc","resumeToken":"tok"}`, `"abc"`, "tok"},
		{"id above 2^53", `{"requestId":9007199254740993,"resumeToken":"tok"}`, `9007199254740993`, "tok"},
		{"empty string id", `{"requestId":"","resumeToken":"tok"}`, `""`, "tok"},
		{"token at the limit", `{"requestId":1,"resumeToken":"` + tokenAtLimit + `"}`, `1`, tokenAtLimit},
		{"with ack", `{"requestId":1,"resumeToken":"tok","_meta":{"io.mcp-resume/ack":2}}`, `1`, "tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, e := spec.DecodeGetStatusParams(json.RawMessage(tt.in))
			if e != nil {
				t.Fatalf("DecodeGetStatusParams(%s): %v", tt.in, e)
			}
			if string(p.RequestID) != tt.id || p.ResumeToken != tt.token {
				t.Errorf("got id %s token %q, want id %s token %q", p.RequestID, p.ResumeToken, tt.id, tt.token)
			}
		})
	}
	idErrors := []struct{ name, in string }{
		{"id missing", `{"resumeToken":"tok"}`},
		{"id null", `{"requestId":null,"resumeToken":"tok"}`},
		{"id bool", `{"requestId":true,"resumeToken":"tok"}`},
		{"id object", `{"requestId":{},"resumeToken":"tok"}`},
		{"id array", `{"requestId":[1],"resumeToken":"tok"}`},
	}
	for _, tt := range append(idErrors, paramsErrorCases...) {
		t.Run("error/"+tt.name, func(t *testing.T) {
			p, e := spec.DecodeGetStatusParams(json.RawMessage(tt.in))
			if e == nil {
				t.Fatalf("DecodeGetStatusParams(%.80s) = %+v, want an error", tt.in, p)
			}
			if p != nil {
				t.Errorf("params returned with the error: %+v", p)
			}
			wantInvalidParams(t, e, spec.MethodGetStatus)
		})
	}
}

func TestDecodeCancelledParams(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		id     string
		reason string
		token  string
	}{
		{"id only", `{"requestId":1}`, `1`, "", ""},
		{"string id and reason", `{"requestId":"a","reason":"user stopped"}`, `"a"`, "user stopped", ""},
		{"with token", `{"requestId":2,"resumeToken":"tok"}`, `2`, "", "tok"},
		{"token at the limit", `{"requestId":2,"resumeToken":"` + tokenAtLimit + `"}`, `2`, "", tokenAtLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := spec.DecodeCancelledParams(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("DecodeCancelledParams(%s): %v", tt.in, err)
			}
			if string(p.RequestID) != tt.id || p.Reason != tt.reason || p.ResumeToken != tt.token {
				t.Errorf("got %s %q %q, want %s %q %q", p.RequestID, p.Reason, p.ResumeToken, tt.id, tt.reason, tt.token)
			}
		})
	}
	errCases := []struct{ name, in string }{
		{"missing", ``},
		{"null", `null`},
		{"array", `[1]`},
		{"string", `"x"`},
		{"empty object", `{}`},
		{"id null", `{"requestId":null}`},
		{"id bool", `{"requestId":false}`},
		{"id object", `{"requestId":{"a":1}}`},
		{"reason a number", `{"requestId":1,"reason":5}`},
		{"token a number", `{"requestId":1,"resumeToken":5}`},
	}
	for _, tt := range errCases {
		t.Run("error/"+tt.name, func(t *testing.T) {
			if p, err := spec.DecodeCancelledParams(json.RawMessage(tt.in)); err == nil {
				t.Fatalf("DecodeCancelledParams(%s) = %+v, want an error", tt.in, p)
			}
		})
	}
	t.Run("error/token too long", func(t *testing.T) {
		in := `{"requestId":1,"resumeToken":"` + tokenTooLong + `"}`
		if p, err := spec.DecodeCancelledParams(json.RawMessage(in)); err == nil {
			t.Fatalf("DecodeCancelledParams accepted a %d-byte token: %+v", len(p.ResumeToken), p.RequestID)
		}
	})
}
