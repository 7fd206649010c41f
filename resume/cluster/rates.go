package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/internal/bucket"
)

// Rates is token buckets shared by the instances of a cluster: one entry of
// the KV bucket mcp-resume-rates per tool and principal (keyed by a hash of
// the two), each the bucket's tokens as of a time, changed by a
// compare-and-set on its revision so that two instances taking at once take
// two tokens. A rate's limit is so the cluster's, not each instance's.
type Rates struct {
	kv      jetstream.KeyValue
	timeout time.Duration
}

// ratesIdle is how long an entry lasts untouched: a bucket not used for
// longer has refilled for any rate of a period up to it (a gone entry is a full
// bucket).
const ratesIdle = 7 * 24 * time.Hour

// ratesTries bounds the compare-and-set rounds of one Take that others keep
// winning; between two, a pause that doubles from a millisecond, jittered, so
// that the takers of one bucket at once go one after the other.
const ratesTries = 32

// Rates opens the cluster's rate buckets, with the node's storage and
// replicas: 64 MiB at most, past which a new caller's bucket is not stored
// (Take errs, and the caller's call runs: see mcp.Server's admit).
func (n *Node) Rates(ctx context.Context) (*Rates, error) {
	kv, err := openBucket(ctx, n.nc, jetstream.KeyValueConfig{
		Bucket:      "mcp-resume-rates",
		Description: "mcp-resume: each tool's rate bucket per principal, keyed by a hash of the two",
		History:     1,
		TTL:         ratesIdle,
		MaxBytes:    64 << 20,
	}, n.opts.Memory, n.opts.Replicas)
	if err != nil {
		return nil, err
	}
	return &Rates{kv: kv, timeout: n.opts.CallTimeout}, nil
}

// Take spends one of the bucket of tool and principal, which holds calls and
// regains them over per. When it is empty it reports how long until it has
// one. Its clock is this instance's (instances' clocks agreeing to well
// under per/calls).
func (r *Rates) Take(ctx context.Context, tool, principal string, calls int, per time.Duration) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	key := rateKey(tool, principal)
	pause := backoff.Double(time.Millisecond, 50*time.Millisecond)
	for try := range ratesTries {
		if try > 0 && !backoff.Sleep(ctx, backoff.Jitter(pause.Next())) {
			return false, 0, ctx.Err()
		}
		var b bucket.Bucket
		rev := uint64(0)
		switch e, err := r.kv.Get(ctx, key); {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, 0, err
		default:
			if b, err = decodeBucket(e.Value()); err != nil {
				return false, 0, err
			}
			rev = e.Revision()
		}
		ok, wait := b.Take(time.Now(), float64(calls), per/time.Duration(calls))
		val := encodeBucket(b)
		var err error
		if rev == 0 {
			_, err = r.kv.Create(ctx, key, val)
		} else {
			_, err = r.kv.Update(ctx, key, val, rev)
		}
		switch {
		case err == nil:
			return ok, wait, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another instance took meanwhile: again, from what it wrote
		default:
			return false, 0, err
		}
	}
	return false, 0, fmt.Errorf("cluster: a rate bucket changed under %d tries in a row", ratesTries)
}

// rateKey names the bucket of tool and principal: a hash, so that any name
// makes a valid key and the bucket lists no principal.
func rateKey(tool, principal string) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write([]byte(principal))
	return hex.EncodeToString(h.Sum(nil))
}

// A bucket's entry: its tokens (a float64's bits) and when they were counted
// (Unix nanoseconds), 16 bytes.
func encodeBucket(b bucket.Bucket) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, math.Float64bits(b.Tokens))
	binary.BigEndian.PutUint64(v[8:], uint64(b.At.UnixNano()))
	return v
}

var errNotABucket = errors.New("cluster: a rate bucket's entry that is not one")

func decodeBucket(v []byte) (bucket.Bucket, error) {
	if len(v) != 16 {
		return bucket.Bucket{}, errNotABucket
	}
	tokens := math.Float64frombits(binary.BigEndian.Uint64(v))
	if math.IsNaN(tokens) || math.IsInf(tokens, 0) {
		return bucket.Bucket{}, errNotABucket
	}
	return bucket.Bucket{Tokens: tokens, At: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))}, nil
}
