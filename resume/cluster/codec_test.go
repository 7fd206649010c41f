package cluster

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume/internal/wire"

	"github.com/mcp-resume/mcp-resume/resume"
)

func TestCodecRoundTrip(t *testing.T) {
	var h resume.TokenHash
	for i := range h {
		h[i] = byte(255 - i)
	}
	calls := []call{
		{from: "alpha", budget: 4999 * time.Millisecond, c: PeerCall{Op: PeerAnswer, Hash: h, Ack: 1<<64 - 1, Inbox: "mr.ctl.beta.in.00ff", Data: []byte("{}")}},
		{from: "b", c: PeerCall{Op: PeerTouch}},
	}
	for _, c := range calls {
		got, err := decodeCall(encodeCall(c.from, c.budget, c.c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("call %+v: decoded %+v, %v", c, got, err)
		}
	}
	replies := []PeerReply{
		{},
		{Status: resume.Status{State: resume.StateExpired, HasInput: true, Dropped: 1<<64 - 1, QueuedBytes: math.MaxInt}, Err: "failed"},
		{Status: resume.Status{State: resume.StateProcessing, HasPending: true, QueuedBytes: 1}},
	}
	for _, r := range replies {
		got, err := decodeReply(encodeReply(r))
		if err != nil || got != r {
			t.Errorf("reply %+v: decoded %+v, %v", r, got, err)
		}
	}
	msgs := []resume.Message{
		{Seq: 1, Kind: resume.KindProgress, Key: `"tok"`, Data: []byte(`{"jsonrpc":"2.0"}`)},
		{Seq: 1<<64 - 1, Kind: resume.KindResponse},
		{Seq: 3, Kind: resume.KindResponse, Data: []byte(`{"error":{}}`), Failed: true},
	}
	for _, m := range msgs {
		got, err := wire.DecodeMessage(wire.EncodeMessage(m))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("message %+v: decoded %+v, %v", m, got, err)
		}
	}
}

func TestCodecRejects(t *testing.T) {
	good := encodeCall("alpha", time.Second, PeerCall{Op: PeerTouch, Inbox: "x"})
	for _, b := range [][]byte{nil, {1}, {2, 1}, good[:34], good[:len(good)-1], append([]byte{9}, good[1:]...)} {
		if _, err := decodeCall(b); err == nil {
			t.Errorf("decodeCall(%x) succeeded", b)
		}
	}
	for _, b := range [][]byte{nil, {1, 1}, {2, 1, 0, 0, 0}, {1, 1, 0, 0x80}, {1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := decodeReply(b); err == nil {
			t.Errorf("decodeReply(%x) succeeded", b)
		}
	}
	for _, b := range [][]byte{nil, {1}, {2, 1, 1, 0}, {1, 1, 0x80}, {1, 1, 1, 5, 'a'}} {
		if _, err := wire.DecodeMessage(b); err == nil {
			t.Errorf("wire.DecodeMessage(%x) succeeded", b)
		}
	}
}

// FuzzDecode: the decoders take anything that reaches a subscription without
// panicking, and what they accept encodes to bytes that decode to the same.
// (Not to the same bytes: a varint may be padded, 0xff 0x00 for 0x7f.)
func FuzzDecode(f *testing.F) {
	f.Add(encodeCall("alpha", time.Second, PeerCall{Op: PeerAttach, Ack: 3, Inbox: "i", Data: []byte("d")}))
	f.Add(encodeReply(PeerReply{Status: resume.Status{State: 1, HasPending: true, Dropped: 2, QueuedBytes: 3}, Err: "ended"}))
	f.Add(wire.EncodeMessage(resume.Message{Seq: 9, Kind: resume.KindRequest, Key: "k", Data: []byte("d")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCall(b); err == nil {
			if again, err := decodeCall(encodeCall(c.from, c.budget, c.c)); err != nil || !reflect.DeepEqual(again, c) {
				t.Errorf("call %+v decodes again as %+v, %v", c, again, err)
			}
		}
		if r, err := decodeReply(b); err == nil {
			if again, err := decodeReply(encodeReply(r)); err != nil || again != r {
				t.Errorf("reply %+v decodes again as %+v, %v", r, again, err)
			}
		}
		if m, err := wire.DecodeMessage(b); err == nil {
			if again, err := wire.DecodeMessage(wire.EncodeMessage(m)); err != nil || !reflect.DeepEqual(again, m) {
				t.Errorf("message %+v decodes again as %+v, %v", m, again, err)
			}
		}
	})
}
