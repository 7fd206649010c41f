package spec_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

func TestErrorJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    *spec.Error
		wire string
	}{
		{"code and message", &spec.Error{Code: spec.CodeMethodNotFound, Message: "no such method"},
			`{"code":-32601,"message":"no such method"}`},
		{"with reason", spec.NewError(spec.CodeInvalidParams, spec.ReasonExpired, "request expired"),
			`{"code":-32602,"message":"request expired","data":{"reason":"expired"}}`},
		{"with reason and detail", &spec.Error{Code: spec.CodeInternalError, Message: "m", Reason: spec.ReasonOwnerLost, Detail: "instance b gone"},
			`{"code":-32603,"message":"m","data":{"reason":"owner_lost","detail":"instance b gone"}}`},
		{"detail only", &spec.Error{Code: 1, Message: "m", Detail: "d"},
			`{"code":1,"message":"m","data":{"detail":"d"}}`},
		{"rate limited", spec.RateLimited(spec.ReasonRateLimited, "m", 2500*time.Millisecond),
			`{"code":-32023,"message":"m","data":{"reason":"rate_limited","retryAfter":3,"retryAfterMs":2500}}`},
		{"rate limited, rounded up", spec.RateLimited(spec.ReasonConcurrencyLimit, "m", 1500*time.Microsecond),
			`{"code":-32023,"message":"m","data":{"reason":"concurrency_limit","retryAfter":1,"retryAfterMs":2}}`},
		{"rate limited now", spec.RateLimited(spec.ReasonRateLimited, "m", 0),
			`{"code":-32023,"message":"m","data":{"reason":"rate_limited","retryAfter":1,"retryAfterMs":1}}`},
		{"empty message", &spec.Error{Code: -1},
			`{"code":-1,"message":""}`},
		{"unicode and html", &spec.Error{Code: 2, Message: "<é> & ✓", Reason: spec.ReasonNotFound},
			`{"code":2,"message":"\u003cé\u003e \u0026 ✓","data":{"reason":"not_found"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.wire {
				t.Fatalf("Marshal = %s, want %s", b, tt.wire)
			}
			var got spec.Error
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			want := *tt.e
			want.ID = nil // the id is not part of the error object
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("round trip = %+v, want %+v", got, want)
			}
		})
	}
}

// The id of the request an error answers travels beside the error object, not in it.
func TestErrorMarshalLeavesIDOut(t *testing.T) {
	e := spec.NewError(1, "", "m")
	e.ID = spec.ID(`5`)
	b, err := json.Marshal(e)
	if err != nil || string(b) != `{"code":1,"message":"m"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
}

func TestErrorUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want spec.Error
	}{
		{"data not an object", `{"code":1,"message":"m","data":"text"}`, spec.Error{Code: 1, Message: "m"}},
		{"data null", `{"code":1,"message":"m","data":null}`, spec.Error{Code: 1, Message: "m"}},
		{"data with other keys", `{"code":1,"message":"m","data":{"reason":"expired","n":[1],"_meta":{"io.mcp-resume/seq":4}}}`,
			spec.Error{Code: 1, Message: "m", Reason: spec.ReasonExpired}},
		{"reason mistyped", `{"code":1,"message":"m","data":{"reason":5}}`, spec.Error{Code: 1, Message: "m"}},
		{"unknown reason kept", `{"code":1,"message":"m","data":{"reason":"something_new"}}`, spec.Error{Code: 1, Message: "m", Reason: "something_new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got spec.Error
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
	for _, in := range []string{`{"code":"x","message":"m"}`, `[1]`, `{`, `{"code":1,"message":2}`} {
		var e spec.Error
		if err := json.Unmarshal([]byte(in), &e); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", in, e)
		}
	}
}

func TestErrorString(t *testing.T) {
	if got, want := spec.NewError(-32602, spec.ReasonExpired, "gone").Error(), "jsonrpc error -32602 (expired): gone"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := spec.NewError(-32601, "", "no method").Error(), "jsonrpc error -32601: no method"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
