package resume

import (
	"errors"
	"fmt"
)

// Errors the engine returns. Callers map them to wire errors with errors.Is.
var (
	// ErrUnknown: no request with this token and id (a wrong token gives the same).
	ErrUnknown = errors.New("resume: no such request")
	// ErrExpired: the request expired, or its result's retention ended.
	ErrExpired = errors.New("resume: request expired")
	// ErrCancelled: the request was cancelled.
	ErrCancelled = errors.New("resume: request cancelled")
	// ErrLimit: Options.MaxLive requests (or Options.MaxLivePerPrincipal of the
	// principal's) are running; the new one is not resumable.
	ErrLimit = errors.New("resume: too many running resumable requests")
	// ErrMemory: the process is short of memory (Options.MemoryShort); the new
	// request is not resumable.
	ErrMemory = errors.New("resume: the process is short of memory")
	// ErrEnded: the request has ended; the call had no effect.
	ErrEnded = errors.New("resume: request has ended")
	// ErrAcknowledged: the client acknowledged the request's final response, so it
	// holds the result, and the request is freed (Attach with such an ack, and
	// lookups of the request afterwards, while its tombstone lives).
	ErrAcknowledged = errors.New("resume: the final response was acknowledged")
	// ErrAckAhead: an acknowledgement names a message the request has not given
	// out; it was not applied.
	ErrAckAhead = errors.New("resume: acknowledgement past the last message")
	// ErrEvicted: the request's result was released before its retention ended,
	// to keep the engine within MaxRetained or its byte budgets (MaxBytes,
	// MaxBytesPerPrincipal), the oldest kept result first. It is an ErrExpired.
	ErrEvicted = fmt.Errorf("%w: its result was released early, the server's bound on kept results being reached", ErrExpired)
	// ErrFull: the byte budget (MaxBytes, or MaxBytesPerPrincipal of the
	// principal's) is used up by queued messages even with every kept result
	// released; the new request is not resumable.
	ErrFull = errors.New("resume: the byte budget for queued messages is used up")
	// ErrExists: a request with StartOptions.Token is live, or ended with its
	// tombstone still kept.
	ErrExists = errors.New("resume: a request with this token exists")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("resume: engine closed")
	// ErrRestarted ends, with Options.Ended's response, a request that the
	// store holds as processing when the engine starts: it was running when an
	// earlier process stopped (see recover.go).
	ErrRestarted = errors.New("the server restarted while the request was running")
	// ErrOwnerLost ends, with Options.Ended's response, a request that was
	// processing when its owner, another instance, was lost (see Cluster).
	ErrOwnerLost = errors.New("the instance running the request was lost")
	// ErrStoreLost ends, with Options.Ended's response, a request whose store
	// lost what it held of it: a Store call for it fails wrapping ErrStoreLost
	// (see Request.loseLocked).
	ErrStoreLost = errors.New("the store lost the request's messages")
	// ErrStopped ends, with Options.Ended's response, a request that was still
	// processing when its instance stopped for good: the drain before a
	// shutdown ran out of time and nothing runs the request again (see
	// Engine.Abandon).
	ErrStopped = errors.New("the server stopped before the request finished (its drain grace ended)")
	// ErrUnreachable: the instance that owns the request, another of a
	// cluster, holds its lease but did not answer (it may have just died:
	// the request is claimed once its lease runs out). Retryable.
	ErrUnreachable = errors.New("the instance running the request did not answer")
)
