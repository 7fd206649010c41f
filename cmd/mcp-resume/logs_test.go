package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// Logs are JSON lines on a file or a pipe, and zerolog's console format on a
// character device (a terminal; /dev/null stands in for one here).
func TestLogOutput(t *testing.T) {
	var buf bytes.Buffer
	if w := logOutput(&buf); w != &buf {
		t.Errorf("a buffer: %T, want it unchanged (JSON)", w)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := logOutput(f); w != f {
		t.Errorf("a regular file: %T, want it unchanged (JSON)", w)
	}
	dev, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer dev.Close()
	cw, ok := logOutput(dev).(zerolog.ConsoleWriter)
	if !ok {
		t.Fatalf("a character device: %T, want zerolog.ConsoleWriter", logOutput(dev))
	}
	// The console format logOutput chose is readable text, not JSON.
	var out bytes.Buffer
	cw.Out, cw.NoColor = &out, true
	l := zerolog.New(cw)
	l.Info().Str("session", "s1").Msg("hello")
	if s := out.String(); strings.HasPrefix(s, "{") || !strings.Contains(s, "hello") || !strings.Contains(s, "session=s1") {
		t.Errorf("console line %q", s)
	}
}
