// Package web is the demo page the mcp-resume binary serves at /: plain HTML and
// JavaScript, embedded, no build step. The page speaks MCP over WebSocket (/ws on
// the same host, or the ws query parameter), calls the countdown demo tool with a
// progress bar, keeps the request's id, resume token and last sequence number in
// sessionStorage, and after a reload or a dropped connection resumes the call
// (requests/getStatus, then requests/resume with the ack extension) instead of
// starting it again. With "as a task", the call is a task of the server
// (2025-11-25 tasks: params.task), which the page polls with tasks/get and reads
// with tasks/result, also after a reload. Its browser test lives in web/test
// (run by .ci/browser).
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the page (index.html at /) and its script. Mount it at /.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/favicon.ico" { // the page has no icon: say so, without a 404 in the console
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; style-src 'self'; frame-ancestors 'none'")
		files.ServeHTTP(w, r)
	})
}
