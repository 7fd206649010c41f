package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// JSONLines returns a Sink writing each event to w as one JSON object on a
// line of its own (Event.MarshalJSON), in one Write.
func JSONLines(w io.Writer) Sink { return jsonLines{w: w} }

type jsonLines struct{ w io.Writer }

func (j jsonLines) Write(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = j.w.Write(append(b, '\n'))
	return err
}

// File is a Sink appending JSON lines to a file, which it creates with mode
// 0600 (an audit trail is for its operator's eyes); Reopen opens the path
// again (after a rotation: the SIGHUP of logrotate's postrotate). Its methods
// are safe for concurrent use.
type File struct {
	path string

	mu sync.Mutex // guards f
	f  *os.File
}

var (
	_ Sink      = (*File)(nil)
	_ io.Closer = (*File)(nil)
)

// OpenFile opens path for appending (creating it 0600), as a File.
func OpenFile(path string) (*File, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, f: f}, nil
}

func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: opening %s: %w", path, err)
	}
	return f, nil
}

// Write appends e as one line.
func (f *File) Write(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return fmt.Errorf("audit: %s is closed", f.path)
	}
	_, err = f.f.Write(append(b, '\n'))
	return err
}

// Reopen opens the file's path again and writes there from now on; on an
// error it keeps writing where it did.
func (f *File) Reopen() error {
	nf, err := openAppend(f.path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	old := f.f
	if old == nil { // closed meanwhile: it stays closed
		f.mu.Unlock()
		return nf.Close()
	}
	f.f = nf
	f.mu.Unlock()
	return old.Close()
}

// Close closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
