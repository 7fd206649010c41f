package jsstore

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
)

// Every field of a record reads back as written, in the one format.
func TestRecordRoundTrip(t *testing.T) {
	base := resume.Record{ID: []byte(`"x"`), State: resume.StateProcessing, Created: time.Unix(0, 12345)}
	with := func(f func(*resume.Record)) resume.Record { r := base; f(&r); return r }
	for _, rec := range []resume.Record{
		base,
		with(func(r *resume.Record) { r.Payload = []byte(`{}`) }),
		with(func(r *resume.Record) { r.Payload = []byte{} }),
		with(func(r *resume.Record) { r.Principal = "p" }),
		with(func(r *resume.Record) { r.Owner = "A" }),
		with(func(r *resume.Record) { r.AckMode = true }),
		with(func(r *resume.Record) { r.Epoch = 7; r.Owner = "A"; r.Payload = []byte(`{"p":1}`) }),
		with(func(r *resume.Record) { r.State = resume.StateExpired; r.Owner = "A"; r.Acknowledged = true }),
		with(func(r *resume.Record) { r.Task = true; r.Payload = []byte(`{"t":1}`) }),
		with(func(r *resume.Record) { r.State = resume.StateCancelled; r.Task = true }),
		with(func(r *resume.Record) { r.Task = true; r.TTL = time.Hour; r.Payload = []byte(`{"t":2}`) }),
		with(func(r *resume.Record) { r.TTL = 1500 * time.Millisecond }),
		with(func(r *resume.Record) { r.TTL = 500 * time.Microsecond }),
		with(func(r *resume.Record) { r.Trace.Parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
		with(func(r *resume.Record) {
			r.Trace = resume.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", State: "k=v"}
		}),
		with(func(r *resume.Record) { r.Deadline = time.UnixMilli(1_780_000_000_123) }),
		with(func(r *resume.Record) {
			r.Deadline = time.UnixMilli(1_780_000_000_000)
			r.Trace.Parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			r.Payload = []byte(`{"d":1}`)
		}),
		with(func(r *resume.Record) {
			r.TTL, r.Task, r.Payload = time.Minute, true, []byte(`{"t":3}`)
			r.Trace = resume.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "a=1,b=2"}
		}),
	} {
		b := encodeRecord(rec)
		if b[0] != recordVersion {
			t.Errorf("%+v written as version %d, want %d", rec, b[0], recordVersion)
		}
		want := rec
		if want.TTL < time.Millisecond {
			want.TTL = 0 // kept in milliseconds: less is none, not unreadable
		}
		got, err := decodeRecord(rec.Hash, b)
		if err != nil || !sameRecord(*got, want) {
			t.Errorf("%+v read back as %+v, %v", rec, got, err)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	ok := encodeRecord(resume.Record{ID: []byte(`1`), AckMode: true, Epoch: 1, Created: time.Unix(1, 0)})
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown":        {7, 0, 0, 0},
		"development v1": {1, byte(resume.StateCompleted), 2, '"', 'a', '"'},
		"development v5": {5, 0, 2, 1, '1', 0, 0, 0, 0},
		"truncated":      ok[:len(ok)-1],
		"unknown flag":   append(bytes.Clone(ok[:len(ok)-1]), 64),
		"trace missing":  append(bytes.Clone(ok[:len(ok)-1]), 32),
		"trace halved":   append(bytes.Clone(ok[:len(ok)-1]), 32, 1, 'x'),
		"empty trace":    append(bytes.Clone(ok[:len(ok)-1]), 32, 0, 0),
		"ttl missing":    append(bytes.Clone(ok[:len(ok)-1]), 16),
		"ttl of 0":       append(bytes.Clone(ok[:len(ok)-1]), 16, 0),
		"trailing bytes": append(bytes.Clone(ok), 'x'),
		"epoch overflow": append(append([]byte{recordVersion, 0, 2, 1, '1', 0, 0}, binary.AppendUvarint(nil, 1<<32)...), 0),
	} {
		if rec, err := decodeRecord(resume.TokenHash{}, b); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, rec)
		}
	}
}

// FuzzDecodeRecord: no stored value makes decodeRecord panic, and whatever it
// accepts is written back the same way.
func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range []resume.Record{
		{ID: []byte(`1`)},
		{ID: []byte(`"a"`), Payload: []byte(`{}`), State: resume.StateFailed},
		{ID: []byte(`2`), Principal: "bob", Owner: "B"},
		{ID: []byte(`3`), Owner: "A", AckMode: true, Epoch: 9, Payload: []byte(`{"p":1}`)},
		{ID: []byte(`4`), Owner: "A", State: resume.StateExpired, Acknowledged: true},
	} {
		f.Add(encodeRecord(rec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(resume.TokenHash{}, b)
		if err != nil {
			return
		}
		again, err := decodeRecord(resume.TokenHash{}, encodeRecord(*rec))
		if err != nil || !sameRecord(*again, *rec) {
			t.Fatalf("%q decoded to %+v, which reads back as %+v, %v", b, rec, again, err)
		}
	})
}

func sameRecord(a, b resume.Record) bool {
	return a.Hash == b.Hash && bytes.Equal(a.ID, b.ID) && a.State == b.State && a.Created.Equal(b.Created) &&
		bytes.Equal(a.Payload, b.Payload) && (a.Payload == nil) == (b.Payload == nil) &&
		a.Principal == b.Principal && a.Owner == b.Owner && a.AckMode == b.AckMode && a.Epoch == b.Epoch &&
		a.Acknowledged == b.Acknowledged && a.Task == b.Task && a.TTL == b.TTL && a.Trace == b.Trace &&
		a.Deadline.Equal(b.Deadline)
}

// A stream message holds one message (as before packs), a pack of several, or
// the seqs of discarded ones; each reads back as written.
func TestStoredRoundTrip(t *testing.T) {
	msgs := []resume.Message{
		{Seq: 3, Kind: resume.KindProgress, Key: "p", Data: []byte(`{"a":1}`)},
		{Seq: 4, Kind: resume.KindNotification},
		{Seq: 9, Kind: resume.KindResponse, Failed: true, Data: []byte(`{"error":{}}`)},
	}
	parts := make([][]byte, len(msgs))
	for i, m := range msgs {
		parts[i] = wire.EncodeMessage(m)
	}
	pack, in := encodePack(parts)
	for i := range parts {
		if !bytes.Equal(in[i], parts[i]) {
			t.Errorf("part %d sits in the pack as %q, want %q", i, in[i], parts[i])
		}
	}
	for name, c := range map[string]struct {
		b       []byte
		msgs    []resume.Message
		dropped []uint64
	}{
		"one":     {parts[0], msgs[:1], nil},
		"pack":    {pack, msgs, nil},
		"dropped": {encodeDropped([]uint64{1, 2, 300, 1 << 40}), nil, []uint64{1, 2, 300, 1 << 40}},
	} {
		got, dropped, err := decodeStored(c.b)
		if err != nil || len(got) != len(c.msgs) || !slices.Equal(dropped, c.dropped) {
			t.Errorf("%s: %+v, %v, %v; want %+v, %v", name, got, dropped, err, c.msgs, c.dropped)
			continue
		}
		for i := range got {
			g, w := got[i], c.msgs[i]
			if g.Seq != w.Seq || g.Kind != w.Kind || g.Key != w.Key || g.Failed != w.Failed || !bytes.Equal(g.Data, w.Data) {
				t.Errorf("%s: message %d read back as %+v, want %+v", name, i, g, w)
			}
		}
	}
}

func TestDecodeStoredRejects(t *testing.T) {
	one := wire.EncodeMessage(resume.Message{Seq: 5, Kind: resume.KindProgress, Data: []byte(`{}`)})
	pack, _ := encodePack([][]byte{one, wire.EncodeMessage(resume.Message{Seq: 6, Kind: resume.KindProgress})})
	backwards, _ := encodePack([][]byte{one, one})
	for name, b := range map[string][]byte{
		"empty":             nil,
		"unknown":           {9, 1, 2},
		"empty pack":        {packVersion},
		"truncated pack":    pack[:len(pack)-1],
		"pack out of order": backwards,
		"pack of garbage":   {packVersion, 2, 7, 7},
		"no discards":       {droppedVersion, 0},
		"discards short":    {droppedVersion, 2, 1},
		"discard repeated":  {droppedVersion, 2, 1, 0},
		"discards trailing": {droppedVersion, 1, 1, 1},
	} {
		if msgs, dropped, err := decodeStored(b); err == nil {
			t.Errorf("%s: decoded %+v %v, want an error", name, msgs, dropped)
		}
	}
}

// FuzzDecodeStored: no stream message makes decodeStored panic.
func FuzzDecodeStored(f *testing.F) {
	one := wire.EncodeMessage(resume.Message{Seq: 5, Kind: resume.KindProgress, Data: []byte(`{}`)})
	pack, _ := encodePack([][]byte{one, wire.EncodeMessage(resume.Message{Seq: 6, Kind: resume.KindRequest, Key: "k"})})
	f.Add(one)
	f.Add(pack)
	f.Add(encodeDropped([]uint64{4, 8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, dropped, err := decodeStored(b)
		if err == nil && len(msgs) == 0 && len(dropped) == 0 {
			t.Fatalf("%q decoded to nothing, without an error", b)
		}
	})
}
