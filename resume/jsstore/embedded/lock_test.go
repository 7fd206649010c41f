//go:build unix

package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDirLock: a second Start on a directory a Server holds fails at once with a
// *DirInUseError naming the holder's pid (this process's: flock keeps out a
// second open of the file in the same process too), and leaves the holder's lock
// file alone; after Shutdown the directory can be started on again. A lock file
// with a stale pid and no lock is taken over.
func TestDirLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LockFile)
	if err := os.WriteFile(path, []byte("999999999\n"), 0o600); err != nil { // as a killed process leaves it
		t.Fatal(err)
	}
	srv, err := Start(&Options{Dir: dir})
	if err != nil {
		t.Fatalf("Start over a stale lock file: %v", err)
	}
	me := strconv.Itoa(os.Getpid()) + "\n"
	if b, err := os.ReadFile(path); err != nil || string(b) != me {
		t.Fatalf("lock file after Start: %q, %v; want %q", b, err, me)
	}

	second, err := Start(&Options{Dir: dir})
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || inUse.Dir != dir || inUse.PID != os.Getpid() {
		if second != nil {
			second.Shutdown()
		}
		srv.Shutdown()
		t.Fatalf("second Start on %s: %v; want a DirInUseError naming pid %d", dir, err, os.Getpid())
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != me {
		t.Errorf("lock file after the refused Start: %q, %v; want %q", b, err, me)
	}

	srv.Shutdown()
	srv, err = Start(&Options{Dir: dir})
	if err != nil {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	srv.Shutdown()
}
