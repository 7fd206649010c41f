package main

import (
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// On a terminal, a --stdio child's log lines go above the progress bar (the
// bar's line is cleared first, and the bar comes back with the next progress),
// a partial line waits for its end, and progress that goes back is explained.
func TestProgressViewLines(t *testing.T) {
	var out strings.Builder
	v := &progressView{w: &out, tty: true}
	v.progress(client.Progress{Progress: 1, Total: 4})
	w := v.lines()
	_, _ = w.Write([]byte("child: starting"))
	if strings.Contains(out.String(), "child") {
		t.Fatalf("a partial line was printed: %q", out.String())
	}
	_, _ = w.Write([]byte(" up\nchild: ready\n"))
	v.progress(client.Progress{Progress: 2, Total: 4})
	v.progress(client.Progress{Progress: 1, Total: 4})
	got := out.String()
	for _, want := range []string{"1/4 \r\033[Kchild: starting up\nchild: ready\n", "progress went back from 2 to 1"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output %q lacks %q", got, want)
		}
	}
}
