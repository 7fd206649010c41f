package jsstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
)

// Replay: a request's messages read back from the stream (or from the
// write-behind, before they are stored), and the index of where they sit.

// ReplayFresh is Replay of a request as the stream holds it now, read again
// each time instead of from what this Store remembers of it: for a request
// another instance writes (resume.FreshReplayer; a task's events streamed on an
// instance that does not run it).
func (s *Store) ReplayFresh(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		var held []loc
		err := s.retry(ctx, func(ctx context.Context) error {
			var err error
			held, err = s.scan(ctx, h)
			return err
		})
		if err != nil {
			yield(resume.Message{}, err)
			return
		}
		i, _ := slices.BinarySearchFunc(held, after+1, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
		todo := held[i:]
		subj := s.subject(h)
		for len(todo) > 0 {
			batch := todo[:min(len(todo), replayBatch)]
			todo = todo[len(batch):]
			if !s.yieldRead(ctx, h, subj, batch, yield) {
				return
			}
		}
	}
}

// Replay reads the request's indexed messages after a sequence number, up to the
// last one indexed at the call, in order: the newest (tailKeep) and those whose
// publish is not acknowledged yet from memory (a Replay does not wait for the
// store), the others from the stream, replayBatch of them in one batched direct get.
// Only indexed messages are read: not a publish that failed but was stored all
// the same (see Append), nor a discarded message.
func (s *Store) Replay(ctx context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		if err := s.ensure(ctx, h); err != nil {
			yield(resume.Message{}, err)
			return
		}
		if err := s.lostErr(h); err != nil {
			yield(resume.Message{}, err)
			return
		}
		s.mu.Lock()
		r := s.reqs[h]
		if r == nil { // deleted meanwhile
			s.mu.Unlock()
			yield(resume.Message{}, resume.ErrNotFound)
			return
		}
		i, _ := slices.BinarySearchFunc(r.held, after+1, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
		todo := slices.Clone(r.held[i:])
		s.mu.Unlock()
		subj := s.subject(h)
		for len(todo) > 0 {
			batch := todo[:min(len(todo), replayBatch)]
			todo = todo[len(batch):]
			var fromStream []loc
			for _, l := range batch {
				if l.data == nil && l.pend == nil {
					fromStream = append(fromStream, l)
				}
			}
			// Read from the stream while what came is yielded.
			stored, stop := s.startRead(ctx, subj, fromStream)
			if !s.yieldBatch(ctx, h, batch, stored, yield) {
				stop()
				return
			}
			stop()
		}
	}
}

// yieldBatch yields the messages of batch that request h still holds, in
// order: from memory, or from stored as they come; it reports whether to go on.
func (s *Store) yieldBatch(ctx context.Context, h resume.TokenHash, batch []loc, stored *batchRead, yield func(resume.Message, error) bool) bool {
	for _, l := range batch {
		var m resume.Message
		switch {
		case l.data != nil || l.pend != nil: // the newest, or not acknowledged yet: from memory
			data := l.data
			if data == nil {
				data = l.pend.part(l.seq) // the message's encoding, alone or in its pack
			}
			var err error
			if m, err = wire.DecodeMessage(data); err == nil && m.Seq != l.seq {
				err = fmt.Errorf("%w: message %d where message %d of %s was", errCodec, m.Seq, l.seq, key(h)[:12])
			}
			if err != nil {
				yield(resume.Message{}, err)
				return false
			}
		default:
			var ok bool
			var err error
			if m, ok, err = stored.message(l.seq); !ok {
				if err != nil {
					yield(resume.Message{}, fmt.Errorf("jsstore: reading messages of %s from %d: %w", key(h)[:12], l.seq, err))
					return false
				}
				if s.isHeld(h, l.seq) {
					s.verify(ctx) // held, yet not in the stream: is it the same stream?
				}
				if err := s.lostErr(h); err != nil {
					yield(resume.Message{}, err) // with the stream
					return false
				}
				continue // deleted meanwhile (the request ended)
			}
		}
		if !s.isHeld(h, l.seq) {
			continue // discarded meanwhile
		}
		if !yield(m, nil) {
			return false
		}
	}
	return true
}

// yieldRead yields the messages of batch as the stream holds them, in order,
// as they come (ReplayFresh: nothing from memory, nothing checked against the
// index); it reports whether to go on.
func (s *Store) yieldRead(ctx context.Context, h resume.TokenHash, subj string, batch []loc, yield func(resume.Message, error) bool) bool {
	stored, stop := s.startRead(ctx, subj, batch)
	defer stop()
	for _, l := range batch {
		m, ok, err := stored.message(l.seq)
		switch {
		case ok:
			if !yield(m, nil) {
				return false
			}
		case err != nil:
			yield(resume.Message{}, fmt.Errorf("jsstore: reading messages of %s from %d: %w", key(h)[:12], l.seq, err))
			return false
		}
	}
	return true
}

// batchRead is a batch of messages being read from the stream (readBatch, in
// a goroutine of its own) while its reader takes those that came: reading and
// sending overlap. Its methods are safe for concurrent use.
type batchRead struct {
	mu   sync.Mutex
	got  map[uint64]resume.Message
	done bool
	err  error
	more chan struct{} // capacity 1: a message came, or the read ended
}

// startRead reads locs in the background; stop ends the read (if it still
// runs) and waits for it. Without locs, nothing is read.
func (s *Store) startRead(ctx context.Context, subj string, locs []loc) (b *batchRead, stop func()) {
	b = &batchRead{got: make(map[uint64]resume.Message, len(locs)), more: make(chan struct{}, 1)}
	if len(locs) == 0 {
		b.done = true
		return b, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.retry(ctx, func(ctx context.Context) error { return s.readBatch(ctx, subj, locs, b) })
		b.mu.Lock()
		b.done, b.err = true, err
		b.mu.Unlock()
		b.tell()
	})
	return b, func() {
		cancel()
		wg.Wait()
	}
}

func (b *batchRead) tell() {
	select {
	case b.more <- struct{}{}:
	default:
	}
}

func (b *batchRead) put(m resume.Message) {
	b.mu.Lock()
	b.got[m.Seq] = m
	b.mu.Unlock()
	b.tell()
}

func (b *batchRead) has(seq uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.got[seq]
	return ok
}

// message waits for message seq: ok is false once the read ended without it,
// with the read's error if it failed.
func (b *batchRead) message(seq uint64) (m resume.Message, ok bool, err error) {
	for {
		b.mu.Lock()
		m, ok = b.got[seq]
		done, err := b.done, b.err
		b.mu.Unlock()
		if ok || done {
			return m, ok, err
		}
		<-b.more
	}
}

// leaderGet reads the message at stream sequence sseq through the stream's
// leader, not a direct get, which any replica answers: a replica that lags the
// leader (a NATS cluster, --replicas) misses the newest messages, and a message
// a batched read did not bring is read here, so that a miss means deleted.
func (s *Store) leaderGet(ctx context.Context, sseq uint64) (subject string, data []byte, err error) {
	m, err := s.leaderRead(ctx, s.opts.Stream, struct {
		Seq uint64 `json:"seq"`
	}{sseq})
	if err != nil {
		return "", nil, err
	}
	return m.Subject, m.Data, nil
}

// leaderMsg is a stream message as the stream's leader gives it.
type leaderMsg struct {
	Subject string `json:"subject"`
	Seq     uint64 `json:"seq"`
	Header  []byte `json:"hdrs"`
	Data    []byte `json:"data"`
}

// apiError is the error of a JetStream API answer (STREAM.MSG.GET, STREAM.MSG.DELETE).
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// leaderRead asks stream's leader for the message req names
// (STREAM.MSG.GET): jetstream.ErrMsgNotFound when there is none.
func (s *Store) leaderRead(ctx context.Context, stream string, req any) (*leaderMsg, error) {
	body, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.js.Conn().RequestWithContext(rctx, s.api+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *leaderMsg `json:"message"`
		Error   *apiError  `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("jsstore: reading from %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Description}
	case resp.Message == nil:
		return nil, fmt.Errorf("jsstore: reading from %s: an empty answer", stream)
	}
	return resp.Message, nil
}

// replayBatch is how many messages a Replay reads from the stream at once.
const replayBatch = 1024

// readBatch reads the messages locs place, all of subject subj, with batched
// direct gets: each asks for the subject's messages from the lowest stream
// sequence still wanted, as many as the span up to the highest could hold
// (at most maxBatchSpan), so that messages of the subject the index does not
// hold (a publish that failed but was stored, see Append) do not cut a batch
// short. A wanted message a batch went past without bringing was deleted, or
// the replica that answered lags: it is read through the stream's leader. The
// messages read go into got, which a try after a failure (a batch slower than
// one try's timeout, on a loaded server) passes again: it reads only what is
// still missing, so that every try makes progress.
func (s *Store) readBatch(ctx context.Context, subj string, locs []loc, got *batchRead) error {
	var missing []loc
	for _, l := range locs {
		if !got.has(l.seq) {
			missing = append(missing, l)
		}
	}
	var confirm []loc // skipped by a batch: deleted, or a lagging replica
	for len(missing) > 0 {
		from, to := missing[0].sseq, missing[0].sseq
		for _, l := range missing {
			from, to = min(from, l.sseq), max(to, l.sseq)
		}
		n := int(min(to-from+1, maxBatchSpan))
		if err := s.directBatch(ctx, subj, from, n, missing, got); err != nil {
			return err
		}
		var reached uint64 // the highest stream sequence a wanted message came from
		for _, l := range missing {
			if got.has(l.seq) {
				reached = max(reached, l.sseq)
			}
		}
		var rest []loc
		for _, l := range missing {
			switch {
			case got.has(l.seq):
			case l.sseq < reached || n == int(to-from+1):
				confirm = append(confirm, l) // the batch went past it, or covered the span
			default:
				rest = append(rest, l)
			}
		}
		if len(rest) == len(missing) { // no progress
			confirm = append(confirm, rest...)
			break
		}
		missing = rest
	}
	for _, l := range confirm {
		if got.has(l.seq) {
			continue // in a pack read for another
		}
		rawSubj, data, err := s.leaderGet(ctx, l.sseq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		msgs, _, err := decodeStored(data)
		i := slices.IndexFunc(msgs, func(m resume.Message) bool { return m.Seq == l.seq })
		if err == nil && (rawSubj != subj || i < 0) {
			err = fmt.Errorf("%w: %s at %d does not hold message %d", errCodec, rawSubj, l.sseq, l.seq)
		}
		if err != nil {
			return fmt.Errorf("jsstore: message at %d: %w", l.sseq, err)
		}
		for _, m := range msgs { // with a pack's others, which may be wanted too
			got.put(m)
		}
	}
	return nil
}

// maxBatchSpan bounds the messages one batched direct get asks for.
const maxBatchSpan = 8192

// directBatch reads up to n messages of subj from stream sequence from, in one
// batched direct get without headers, and adds those locs place to got.
func (s *Store) directBatch(ctx context.Context, subj string, from uint64, n int, locs []loc, got *batchRead) error {
	want := make(map[uint64]bool, len(locs))
	for _, l := range locs {
		want[l.seq] = true
	}
	nc := s.js.Conn()
	sub, err := nc.SubscribeSync(nc.NewRespInbox())
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(struct {
		Seq       uint64 `json:"seq"`
		NextFor   string `json:"next_by_subj"`
		Batch     int    `json:"batch"`
		NoHeaders bool   `json:"no_hdr"`
	}{from, subj, n, true})
	if err := nc.PublishRequest(s.api+"DIRECT.GET."+s.opts.Stream, sub.Subject, req); err != nil {
		return err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			msgs, _, err := decodeStored(m.Data) // one message, a pack of them, or discards
			if err != nil {
				return fmt.Errorf("jsstore: batched read of %s: %w", subj, err)
			}
			for _, msg := range msgs {
				if want[msg.Seq] {
					got.put(msg)
				}
			}
		case "204", "404": // end of batch; nothing (more) of the subject
			return nil
		default:
			return fmt.Errorf("jsstore: batched read of %s: status %s %s", subj, status, m.Header.Get("Description"))
		}
	}
}

// isHeld reports whether request h still holds message seq.
func (s *Store) isHeld(h resume.TokenHash, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[h]
	if r == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(r.held, seq, func(l loc, seq uint64) int { return cmp.Compare(l.seq, seq) })
	return ok
}

// ensure makes sure this process knows request h and has its complete index: from
// memory, or by reading its record and its messages (a request of an earlier
// process). It returns resume.ErrNotFound for a request the store does not hold.
func (s *Store) ensure(ctx context.Context, h resume.TokenHash) error {
	s.mu.Lock()
	r := s.reqs[h]
	ok := r != nil && r.loaded
	s.mu.Unlock()
	if ok {
		return nil
	}
	var rev uint64
	var owner string
	if r == nil {
		rec, n, err := s.get(ctx, h)
		if err != nil {
			return err
		}
		rev, owner = n, rec.Owner
	}
	held, err := s.scan(ctx, h)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := s.reqs[h]; {
	case r == nil:
		s.reqs[h] = &request{loaded: true, held: held, rev: rev, owner: owner}
	case !r.loaded:
		r.loaded, r.held = true, held
	}
	return nil
}

// scan reads where each of a request's messages sits in the stream, scanBatch
// stream messages a round trip (a batched direct get): a message stored alone
// or in a pack, less those a stream message says are discarded (see sweep).
func (s *Store) scan(ctx context.Context, h resume.TokenHash) ([]loc, error) {
	subj := s.subject(h)
	var held []loc
	var dropped []uint64
	for from := uint64(1); from != 0; {
		var err error
		from, err = s.scanBatch(ctx, subj, from, &held, &dropped)
		if err != nil {
			return nil, fmt.Errorf("jsstore: reading %s from %d: %w", key(h)[:12], from, err)
		}
	}
	// A publish sent again after its acknowledgement failed sits after
	// messages appended later: the index is in the request's order.
	slices.SortStableFunc(held, func(a, b loc) int { return cmp.Compare(a.seq, b.seq) })
	held = slices.CompactFunc(held, func(a, b loc) bool { return a.seq == b.seq })
	if len(dropped) > 0 {
		slices.Sort(dropped)
		held = slices.DeleteFunc(held, func(l loc) bool { _, ok := slices.BinarySearch(dropped, l.seq); return ok })
	}
	return held, nil
}

// scanBatch is how many stream messages one round trip of a scan reads.
const scanBatch = 1024

// scanBatch adds to held the messages of subject subj stored from stream
// sequence from on, up to scanBatch stream messages of it, and to dropped the
// seqs those say are discarded; it returns where the next batch starts, 0 when
// there is no more.
func (s *Store) scanBatch(ctx context.Context, subj string, from uint64, held *[]loc, dropped *[]uint64) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	nc := s.js.Conn()
	sub, err := nc.SubscribeSync(nc.NewRespInbox())
	if err != nil {
		return from, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
	}{from, subj, scanBatch})
	if err := nc.PublishRequest(s.api+"DIRECT.GET."+s.opts.Stream, sub.Subject, req); err != nil {
		return from, err
	}
	next := from
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return from, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			sseq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil || sseq < next {
				return from, fmt.Errorf("jsstore: batched read of %s: stream sequence %q", subj, m.Header.Get(jetstream.SequenceHeader))
			}
			msgs, d, err := decodeStored(m.Data)
			if err != nil {
				return from, fmt.Errorf("jsstore: message at %d: %w", sseq, err)
			}
			for _, msg := range msgs {
				*held = append(*held, loc{seq: msg.Seq, sseq: sseq})
			}
			*dropped = append(*dropped, d...)
			next = sseq + 1
		case "404": // nothing (more) of the subject
			return 0, nil
		case "204": // the end of the batch: more after it, or not
			if n, err := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64); err == nil && n == 0 {
				return 0, nil
			}
			if next == from { // an empty batch that says more is pending: read on past nothing
				return 0, nil
			}
			return next, nil
		default:
			return from, fmt.Errorf("jsstore: batched read of %s: status %s %s", subj, status, m.Header.Get("Description"))
		}
	}
}
