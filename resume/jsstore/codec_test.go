package jsstore

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Records written by earlier versions of this package, byte for byte: each must
// still decode to what it said, and the same record is still written the same.
func TestDecodeOlderRecords(t *testing.T) {
	created := time.Unix(1, 0)
	ts := binary.AppendVarint(nil, created.UnixNano())
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name string
		b    []byte
		want resume.Record
	}{
		{"v1", cat([]byte{1, byte(resume.StateCompleted)}, ts, []byte(`"a"`)),
			resume.Record{ID: []byte(`"a"`), State: resume.StateCompleted}},
		{"v2 payload", cat([]byte{2, byte(resume.StateProcessing)}, ts, []byte{3}, []byte(`"a"{"p":1}`)),
			resume.Record{ID: []byte(`"a"`), State: resume.StateProcessing, Payload: []byte(`{"p":1}`)}},
		{"v3 principal", cat([]byte{3, byte(resume.StateProcessing)}, ts, []byte{1}, []byte(`7`), []byte{3}, []byte("bob"), []byte{0}),
			resume.Record{ID: []byte(`7`), State: resume.StateProcessing, Principal: "bob"}},
		{"v4 owner and payload", cat([]byte{4, byte(resume.StateProcessing)}, ts, []byte{1}, []byte(`7`), []byte{0}, []byte{1}, []byte("A"), []byte{1}, []byte(`{}`)),
			resume.Record{ID: []byte(`7`), State: resume.StateProcessing, Owner: "A", Payload: []byte(`{}`)}},
	} {
		got, err := decodeRecord(resume.TokenHash{}, c.b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.want.Created = created
		if !sameRecord(*got, c.want) {
			t.Fatalf("%s: decoded %+v, want %+v", c.name, got, c.want)
		}
		if b := encodeRecord(c.want); !bytes.Equal(b, c.b) {
			t.Fatalf("%s: written as %v, want the same bytes as before, %v", c.name, b, c.b)
		}
	}
}

// Each record is written in the oldest version that can say it (so that an older
// process reads what it can), and reads back the same.
func TestRecordVersions(t *testing.T) {
	base := resume.Record{ID: []byte(`"x"`), State: resume.StateProcessing, Created: time.Unix(0, 12345)}
	with := func(f func(*resume.Record)) resume.Record { r := base; f(&r); return r }
	for _, c := range []struct {
		rec     resume.Record
		version byte
	}{
		{base, 1},
		{with(func(r *resume.Record) { r.Payload = []byte(`{}`) }), 2},
		{with(func(r *resume.Record) { r.Principal = "p" }), 3},
		{with(func(r *resume.Record) { r.Owner = "A" }), 4},
		{with(func(r *resume.Record) { r.AckMode = true }), 5},
		{with(func(r *resume.Record) { r.Epoch = 7; r.Owner = "A"; r.Payload = []byte(`{"p":1}`) }), 5},
		{with(func(r *resume.Record) { r.State = resume.StateExpired; r.Owner = "A"; r.Acknowledged = true }), 5},
	} {
		b := encodeRecord(c.rec)
		if b[0] != c.version {
			t.Errorf("%+v written as version %d, want %d", c.rec, b[0], c.version)
		}
		got, err := decodeRecord(c.rec.Hash, b)
		if err != nil || !sameRecord(*got, c.rec) {
			t.Errorf("%+v read back as %+v, %v", c.rec, got, err)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	ok := encodeRecord(resume.Record{ID: []byte(`1`), AckMode: true, Epoch: 1, Created: time.Unix(1, 0)})
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown":        {6, 0, 0, 0},
		"truncated":      ok[:len(ok)-1],
		"unknown flag":   append(bytes.Clone(ok[:len(ok)-1]), 8),
		"v4 ack flag":    {4, 0, 2, 1, '1', 0, 0, 2},
		"trailing bytes": append(bytes.Clone(ok), 'x'),
		"epoch overflow": append(append([]byte{5, 0, 2, 1, '1', 0, 0}, binary.AppendUvarint(nil, 1<<32)...), 0),
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
		a.Acknowledged == b.Acknowledged
}
