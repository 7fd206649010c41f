package spec_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

func TestParseIDRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // the bytes MarshalJSON returns
	}{
		{"string", `"abc"`, `"abc"`},
		{"empty string", `""`, `""`},
		{"small int", `1`, `1`},
		{"zero", `0`, `0`},
		{"above 2^53", `9007199254740993`, `9007199254740993`},
		{"negative", `-1`, `-1`},
		{"exponent", `1.5e3`, `1.5e3`},
		{"fraction spelled 1.0", `1.0`, `1.0`},
		{"unicode string", `"héllo, 世界 🌍"`, `"héllo, 世界 🌍"`},
		{"escaped unicode string", `"\u00e9\ud83c\udf0d"`, `"\u00e9\ud83c\udf0d"`},
		{"string with escapes", `"a\"b\\c\n"`, `"a\"b\\c\n"`},
		{"surrounding whitespace trimmed", " \t42\n", `42`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := spec.ParseID([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseID(%s): %v", tt.in, err)
			}
			got, err := id.MarshalJSON()
			if err != nil || string(got) != tt.want {
				t.Fatalf("MarshalJSON = %s, %v; want %s", got, err, tt.want)
			}
			if id.String() != tt.want {
				t.Errorf("String = %s, want %s", id.String(), tt.want)
			}
			// Through encoding/json, inside a struct, and back.
			type holder struct {
				ID spec.ID `json:"id"`
			}
			b, err := json.Marshal(holder{id})
			if err != nil || string(b) != `{"id":`+tt.want+`}` {
				t.Fatalf("json.Marshal = %s, %v; want {\"id\":%s}", b, err, tt.want)
			}
			var h holder
			if err := json.Unmarshal(b, &h); err != nil {
				t.Fatalf("json.Unmarshal(%s): %v", b, err)
			}
			if !h.ID.Equal(id) {
				t.Fatalf("json.Unmarshal gave id %s, want %s", h.ID, id)
			}
		})
	}
}

func TestParseIDRejects(t *testing.T) {
	for _, in := range []string{
		``, `   `, `null`, `true`, `false`, `{}`, `{"a":1}`, `[]`, `[1]`,
		`"unterminated`, `1 2`, `01`, `+1`, `.5`, `1.`, `-`, `NaN`, `Infinity`, `abc`, `"a"x`,
	} {
		t.Run(in, func(t *testing.T) {
			id, err := spec.ParseID([]byte(in))
			if err == nil {
				t.Fatalf("ParseID(%q) = %s, want an error", in, id)
			}
			if id != nil {
				t.Errorf("ParseID(%q) returned id %s with its error", in, id)
			}
			var got spec.ID
			if err := json.Unmarshal([]byte(`{"id":`+in+`}`), &struct {
				ID *spec.ID `json:"id"`
			}{&got}); err == nil && got != nil {
				t.Errorf("json.Unmarshal accepted id %q as %s", in, got)
			}
		})
	}
}

func TestParseIDCopies(t *testing.T) {
	raw := []byte(`12345`)
	id, err := spec.ParseID(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[0] = '9'
	if string(id) != `12345` {
		t.Fatalf("id changed with its input: %s", id)
	}
}

func TestIDZeroMarshalsNull(t *testing.T) {
	var id spec.ID
	if b, err := id.MarshalJSON(); err != nil || string(b) != "null" {
		t.Fatalf("zero ID MarshalJSON = %s, %v; want null", b, err)
	}
}

func TestIDEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true},
		{`"1"`, `1`, false},
		{`1`, `1.0`, false}, // the same number, a different id: ids compare as bytes
		{`"a"`, `"a"`, true},
	}
	for _, tt := range tests {
		if got := spec.ID(tt.a).Equal(spec.ID(tt.b)); got != tt.want {
			t.Errorf("ID(%s).Equal(%s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// UnmarshalJSON reports a bad id with an error that names it.
func TestIDUnmarshalError(t *testing.T) {
	var id spec.ID
	err := id.UnmarshalJSON([]byte(`{"x":1}`))
	if err == nil {
		t.Fatal("UnmarshalJSON accepted an object")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		t.Errorf("UnmarshalJSON error is a syntax error: %v", err)
	}
}
