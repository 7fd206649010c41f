//go:build !unix

package oauth

import "context"

// lockFile does nothing where there is no flock: FileStore.Lock serializes
// this process's logins only.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
