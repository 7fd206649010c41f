package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The page and its assets are served from the embedded tree; anything else is 404
// and only GET and HEAD are allowed. (The page's behaviour is tested in a browser:
// web/test, run by .ci/browser.)
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script src="app.js">`},
		{"GET", "/app.js", 200, "text/javascript", "requests/resume"},
		{"GET", "/style.css", 200, "text/css", ".bar"},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/nope", 404, "", ""},
		{"GET", "/favicon.ico", 204, "", ""},
		{"POST", "/", 405, "", ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s %s: %d %q %.60q, want %d %q containing %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.ctype, tc.body)
		}
		if tc.status == 200 && resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no Content-Security-Policy", tc.method, tc.path)
		}
	}
}
