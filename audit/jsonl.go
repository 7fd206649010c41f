package audit

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// JSONLines returns a Sink writing each event to w as one JSON object on a
// line of its own (Event.MarshalJSON): Write in one Write of w, WriteBatch
// (BatchSink) in as few as hold complete lines. It is safe for concurrent
// use when w is.
func JSONLines(w io.Writer) Sink { return &jsonLines{w: w} }

type jsonLines struct {
	w io.Writer

	mu  sync.Mutex // guards buf
	buf lineBuffer
}

var _ BatchSink = (*jsonLines)(nil)

func (j *jsonLines) Write(e Event) error { return j.WriteBatch([]Event{e}) }

func (j *jsonLines) WriteBatch(evs []Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.buf.write(j.w, evs)
}

// maxWrite bounds the lines one write holds: past it, the lines encoded so
// far are written, and the next begin a write of their own.
const maxWrite = 64 << 10

// lineBuffer is where a batch's lines are encoded, kept from one batch to
// the next.
type lineBuffer struct{ b []byte }

// write writes evs to w as JSON lines, in writes of complete lines, up to
// maxWrite each (or one line longer). An event that cannot be encoded is
// left out, the others written; the first such error is returned, unless w
// fails, which ends the batch with its error.
func (lb *lineBuffer) write(w io.Writer, evs []Event) error {
	b := lb.b[:0]
	defer func() {
		if cap(b) > 4*maxWrite {
			b = nil // one huge event's space is not kept
		}
		lb.b = b[:0]
	}()
	var first error
	for i := range evs {
		var err error
		if b, err = evs[i].appendJSON(b); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		b = append(b, '\n')
		if len(b) >= maxWrite {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if len(b) > 0 {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return first
}

// File is a Sink appending JSON lines to a file, which it creates with mode
// 0600 (an audit trail is for its operator's eyes); Reopen opens the path
// again (after a rotation: the SIGHUP of logrotate's postrotate), between
// two writes. A batch (WriteBatch) goes in one write of complete lines (one
// per 64 KiB): nothing is held back in the File, and a process that dies
// between two writes leaves no line in part. Its methods are safe for
// concurrent use.
type File struct {
	path string

	mu  sync.Mutex // guards f and buf
	f   *os.File
	buf lineBuffer
}

var (
	_ Sink      = (*File)(nil)
	_ BatchSink = (*File)(nil)
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
func (f *File) Write(e Event) error { return f.WriteBatch([]Event{e}) }

// WriteBatch appends evs, a line each, in one write (or one per 64 KiB).
func (f *File) WriteBatch(evs []Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.f == nil {
		return fmt.Errorf("audit: %s is closed", f.path)
	}
	return f.buf.write(f.f, evs)
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
