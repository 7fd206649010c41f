package oauth

import (
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// maxChecked bounds the verdicts a checkedCache keeps; past it the oldest go.
const maxChecked = 10000

// checkedCache keeps what checking a token concluded, by the token's SHA-256
// (never the token), for a while: a client sends its token with every
// request, and a JWT's signature is verified (an opaque token introspected)
// once a while rather than each time.
type checkedCache struct {
	mu    sync.Mutex // guards m and order
	m     map[[32]byte]verdict
	order [][32]byte
}

// verdict is a kept conclusion: the token (nil: refused, for reason and
// desc) until when.
type verdict struct {
	tok    *Token
	reason spec.Reason
	desc   string
	until  time.Time
}

// get returns the verdict kept for key, if it holds at now.
func (c *checkedCache) get(key [32]byte, now time.Time) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	if !ok || !now.Before(v.until) {
		return verdict{}, false
	}
	return v, true
}

// put keeps v for key, forgetting the oldest past maxChecked.
func (c *checkedCache) put(key [32]byte, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]verdict{}
	}
	if _, ok := c.m[key]; !ok {
		c.order = append(c.order, key)
	}
	c.m[key] = v
	for len(c.order) > maxChecked {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
