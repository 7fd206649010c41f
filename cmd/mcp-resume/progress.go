package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// progressView shows a call's progress on stderr: a bar redrawn in place on a
// terminal, one line per notification otherwise.
type progressView struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex // guards the fields below
	shown bool       // a bar is on the current line
	last  float64    // the last progress shown
	seen  bool       // some progress was shown
}

func newProgressView(w io.Writer) *progressView {
	return &progressView{w: w, tty: isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const barWidth = 30

func (v *progressView) progress(p client.Progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen && p.Progress < v.last {
		v.lineLocked(fmt.Sprintf("progress went back from %g to %g: the server ran the call again from the start (a restartable tool, after a restart)", v.last, p.Progress))
	}
	v.last, v.seen = p.Progress, true
	if !v.tty {
		if p.Total > 0 {
			fmt.Fprintf(v.w, "progress %g/%g %s\n", p.Progress, p.Total, p.Message)
		} else {
			fmt.Fprintf(v.w, "progress %g %s\n", p.Progress, p.Message)
		}
		return
	}
	bar := strings.Repeat("·", barWidth)
	count := fmt.Sprintf("%g", p.Progress)
	if p.Total > 0 {
		n := int(float64(barWidth) * min(p.Progress/p.Total, 1))
		bar = strings.Repeat("█", n) + strings.Repeat("·", barWidth-n)
		count = fmt.Sprintf("%g/%g", p.Progress, p.Total)
	}
	fmt.Fprintf(v.w, "\r\033[K%s %s %s", bar, count, p.Message)
	v.shown = true
}

// line prints a message on a line of its own, keeping the bar below it.
func (v *progressView) line(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lineLocked(s)
}

func (v *progressView) lineLocked(s string) {
	if v.shown {
		fmt.Fprint(v.w, "\r\033[K")
		v.shown = false
	}
	fmt.Fprintln(v.w, s)
}

// lines is a writer whose complete lines are printed with line (a child's
// log lines above the bar); a partial line waits for its end.
func (v *progressView) lines() io.Writer { return &lineWriter{v: v} }

type lineWriter struct {
	v   *progressView
	mu  sync.Mutex
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.v.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a line without end: show what came
		w.v.line(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// done ends the bar's line.
func (v *progressView) done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shown {
		fmt.Fprintln(v.w)
		v.shown = false
	}
}

// parseID reads a request id as typed: a JSON string or number as is, anything
// else as a string.
func parseID(s string) spec.ID {
	if id, err := spec.ParseID([]byte(s)); err == nil {
		return id
	}
	b, _ := json.Marshal(s)
	return spec.ID(b)
}
