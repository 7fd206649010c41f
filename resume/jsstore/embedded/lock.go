package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the file in Options.Dir that a Server holds an exclusive lock on
// for its whole life, and that names the holder's process id.
const LockFile = "mcp-resume.lock"

// DirInUseError is Start's error when another Server (in this process or
// another) holds the directory: two servers on one directory would each run the
// other's requests.
type DirInUseError struct {
	Dir string // Options.Dir, as given
	PID int    // the holder's process id, as its lock file says; 0 when unknown
}

func (e *DirInUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("embedded: directory %s is in use by another process", e.Dir)
	}
	return fmt.Sprintf("embedded: directory %s is in use by pid %d", e.Dir, e.PID)
}

// lockDir creates dir if need be and takes the exclusive lock on its LockFile,
// writing this process's id into it. It fails with a *DirInUseError, at once,
// when another holds the lock. The lock lasts until release is called or the
// process ends (the operating system drops it then, however the process
// ended): a lock file left by a killed process does not stand in the way, its
// content is only informative.
func lockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded: creating the directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	// Go opens files close-on-exec: a child process (the gateway's upstream)
	// does not inherit the lock and keep it past this process's end.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: opening the lock file: %w", err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLocked) {
			return nil, &DirInUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("embedded: locking %s: %w", path, err)
	}
	// Overwrite in place, then cut: a reader never sees an empty file where a
	// stale pid was.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	_, err = f.WriteAt(pid, 0)
	if err == nil {
		err = f.Truncate(int64(len(pid)))
	}
	if err != nil {
		_ = f.Close() // releases the lock
		return nil, fmt.Errorf("embedded: writing the lock file %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// errLocked is lockFile's error when another holds the lock.
var errLocked = errors.New("locked by another")

// readPID is the process id in a lock file, 0 when there is none.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
