package e2etest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// TwoNames returns the params (members, without braces) of tools/call requests
// that name tool protected to encoding/json, mcp-go's reader (it matches keys
// ignoring case and keeps the last), while an exact reader of "name" sees
// "echo" or nothing: a check and a handler that read them apart would run
// protected under echo's scope. Every one must be refused.
func TwoNames(protected string) []string {
	args := `"arguments":{"seconds":0,"steps":1}`
	var out []string
	for _, spelled := range []string{`"Name"`, `"NAME"`, `"nAmE"`, `"n\u0061me"`, `"name"`} {
		out = append(out, fmt.Sprintf(`"name":"echo",%s:%q,%s`, spelled, protected, args))
	}
	return append(out, fmt.Sprintf(`"NAME":%q,%s`, protected, args), fmt.Sprintf(`%s,"Name":%q`, args, protected))
}

// RefusedAsAmbiguous fails t unless m is the error that refuses a message
// with a key read two ways (what); the tool's result there means the
// protected tool ran.
func RefusedAsAmbiguous(t testing.TB, what string, m Msg) {
	t.Helper()
	if m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != spec.ReasonAmbiguousKey {
		t.Errorf("%s: %s, want -32602 %s", what, m.Raw, spec.ReasonAmbiguousKey)
	}
	if strings.Contains(string(m.Raw), "countdown done") {
		t.Errorf("%s: the protected tool ran: %s", what, m.Raw)
	}
}

// RefusesTwoNames sends every TwoNames call of protected, in both eras, as
// raw POSTs (post sends msg, as a 2026 request when modern, and returns its
// answer) and over w's connection, and fails t unless each is refused as
// ambiguous; where names the server.
func RefusesTwoNames(t testing.TB, where, protected string, post func(msg string, modern bool) Msg, w *Client) {
	t.Helper()
	env := Envelope(`{}`)
	for i, params := range TwoNames(protected) {
		legacy := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s}}`, i, params)
		modern := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,%s}}`, i, params, env)
		RefusedAsAmbiguous(t, where+", HTTP, 2025, "+params, post(legacy, false))
		RefusedAsAmbiguous(t, where+", HTTP, 2026, "+params, post(modern, true))
		for era, msg := range map[string]string{"2025": legacy, "2026": modern} {
			w.Send("%s", msg)
			m, _ := w.Response(fmt.Sprint(i))
			RefusedAsAmbiguous(t, where+", WebSocket, "+era+", "+params, m)
		}
	}
}
