//go:build !unix

package embedded

import "os"

// lockFile takes no lock where flock(2) does not exist (Windows): the lock file
// still names the last process that started on the directory, but a second
// process is not kept out.
func lockFile(*os.File) error { return nil }
