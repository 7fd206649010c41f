package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// TestRecoveryAfterKill (issue 24): serve --data-dir is killed (SIGKILL) at a random
// moment of a mix of calls, started again on the same directory, and every
// request is checked against what its client saw before the kill; then more
// calls, another kill, another start, and every request checked again. The
// calls: countdowns that complete, countdowns that end in a tool error
// (fail=true), countdowns cancelled once their policy arrives, and longer ones
// running at the kill; some results are acknowledged. The rules:
//
//   - acknowledged (the getStatus that acked it answered), or cancelled (a
//     getStatus answered cancelled): not_found, and never run again (the store
//     deleted it before the answer; a deleted request used to come back after a
//     kill, see jsstore's TestDeleteSurvivesKill);
//   - a result the client received: the same status (completed, or failed for a
//     tool error or server_restarted) and the same result on resume, never run
//     again; or not_found once its acknowledgement was sent (unanswered at the
//     kill: the store may have deleted it);
//   - a call with a tool error never reports completed;
//   - a call with its policy but no result: its own result (it finished before
//     the kill), failed with server_restarted, or processing and run again (with
//     --restartable, the record holding the call) and then its own result;
//     never not_found unless its cancel was sent, or its policy came in the
//     last recentPolicy before the kill (the record of a new call waits up to a
//     millisecond before it is written: jsstore.Options.DeferRecords).
//
// "restartable" starts the first two servers with --restartable countdown and the
// third without (the stored calls decide what runs again). Runs are counted from
// the servers' log lines ("running a restartable request again"). The servers
// run without the limit on failed token checks: the checks of deleted requests
// answer not_found, which would count.
// MR_RECOVERY_ROUNDS (default 2) sets the rounds of each variant,
// MR_RECOVERY_SEED the seed (default: the time, logged).
func TestRecoveryAfterKill(t *testing.T) {
	t.Parallel() // a subprocess's test, mostly waiting: beside the package's others
	rounds := 2
	if s := os.Getenv("MR_RECOVERY_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MR_RECOVERY_ROUNDS=%q: want a positive number", s)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MR_RECOVERY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MR_RECOVERY_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("MR_RECOVERY_SEED=%d MR_RECOVERY_ROUNDS=%d", seed, rounds)
	for vi, v := range []struct {
		name        string
		restartable [3]bool // per server of a round
	}{
		{"plain", [3]bool{false, false, false}},
		{"restartable", [3]bool{true, true, false}},
	} {
		t.Run(v.name, func(t *testing.T) {
			for round := range rounds {
				rng := rand.New(rand.NewPCG(seed, uint64(vi*1000+round)))
				rc := &recoveryCheck{t: t, rng: rng, dir: t.TempDir(), reqs: map[string]*tracked{}, name: fmt.Sprintf("%s round %d", v.name, round)}
				for phase, restartable := range v.restartable {
					rc.phase(phase, restartable, phase < len(v.restartable)-1)
				}
				if t.Failed() {
					t.Fatalf("seed %d, %s", seed, rc.name)
				}
			}
		})
	}
}

type callKind int

const (
	kindDone   callKind = iota // completes
	kindFail                   // ends in a tool error
	kindCancel                 // cancelled once its policy arrives
	kindLong                   // most likely running at the kill
)

var kindNames = [...]string{"done", "fail", "cancel", "long"}

// tracked is one request as its client saw it.
type tracked struct {
	id      string // raw JSON
	kind    callKind
	want    string // the text of its result
	payload bool   // started by a server with --restartable countdown
	token   string
	// policyAt: when its policy was read.
	policyAt time.Time
	// Its final response, once received (live, or on a resume).
	final   bool
	seq     uint64
	text    string
	isError bool        // a tool error
	reason  spec.Reason // a JSON-RPC error's reason
	// acked: a getStatus that acknowledged the final response answered.
	ackSent, acked bool
	// cancelled: a getStatus after the cancel answered cancelled.
	cancelSent, cancelled bool
	gone                  bool // answered not_found as allowed: not looked at again
	// atStart: final || acked || cancelled when the current server started;
	// deletedAtStart: acked || cancelled then.
	atStart, deletedAtStart bool
}

func (r *tracked) String() string {
	return fmt.Sprintf("%s (%s, payload %v, final %v text %q isError %v reason %q, acked %v/%v, cancelled %v/%v)",
		r.id, kindNames[r.kind], r.payload, r.final, r.text, r.isError, r.reason, r.ackSent, r.acked, r.cancelSent, r.cancelled)
}

// recentPolicy bounds how long before a kill a call's policy may have come for
// the call to be unknown after it: its record waits up to a millisecond before
// it is written, and the test reads the policy some time after the server sent
// it (longer under -race).
const recentPolicy = 250 * time.Millisecond

type recoveryCheck struct {
	killedAt time.Time // the last kill
	t        *testing.T
	rng      *rand.Rand
	dir      string
	name     string
	reqs     map[string]*tracked
	ids      []string // in the order sent
}

// deleted reports a request that the store had deleted (its client acknowledged
// its result, or cancelled it) and that was back after the kill.
func (rc *recoveryCheck) deleted(n int, format string, args ...any) {
	rc.t.Helper()
	rc.t.Errorf("%s, server %d: deleted before the kill, back after it: "+format, append([]any{rc.name, n}, args...)...)
}

// phase starts a server on the directory, checks every request an earlier one
// left, then (when more is true) makes calls and kills the server at a random
// moment.
func (rc *recoveryCheck) phase(n int, restartable, more bool) {
	t := rc.t
	for _, r := range rc.reqs {
		r.atStart = r.final || r.acked || r.cancelled
		r.deletedAtStart = r.acked || r.cancelled
	}
	args := "serve --stdio --token-failure-burst -1 --data-dir " + rc.dir + os.Getenv("MR_RECOVERY_EXTRA")
	if restartable {
		args += " --restartable countdown"
	}
	p := startRecoveryProc(t, args)
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"recovery","version":"1"}}}`)
	if m := p.response(`"init"`); m.Error != nil {
		t.Fatalf("%s: initialize: %s", rc.name, m.Raw)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, id := range rc.ids {
		rc.check(p, rc.reqs[id], n)
	}
	if more {
		rc.live(p, n, restartable)
	} else {
		p.kill()
	}
	// Runs again (as the server starts): only of requests whose result had not
	// reached their client.
	for _, id := range p.reruns() {
		r := rc.reqs[id]
		switch {
		case r == nil:
			t.Errorf("%s, server %d: ran again %s, which this client never called", rc.name, n, id)
		case r.deletedAtStart:
			rc.deleted(n, "ran again %v", r)
		case r.atStart || !r.payload:
			t.Errorf("%s, server %d: ran again %v, whose result had reached its client (or which is not restartable)", rc.name, n, r)
		}
	}
	t.Logf("%s, server %d: %s; %d requests", rc.name, n, p.recovered(), len(rc.reqs))
}

// live sends calls at random intervals, reacting to what comes, and kills the
// server at a random moment.
func (rc *recoveryCheck) live(p *recoveryProc, n int, restartable bool) {
	const calls = 24
	sent := 0
	next := time.NewTimer(0)
	defer next.Stop()
	kill := time.NewTimer(time.Duration(50+rc.rng.IntN(1200)) * time.Millisecond)
	defer kill.Stop()
	for {
		select {
		case m, ok := <-p.in:
			if !ok {
				rc.t.Fatalf("%s, server %d: the server exited before the kill", rc.name, n)
			}
			rc.handle(p, m)
		case <-next.C:
			rc.call(p, n, sent, restartable)
			if sent++; sent < calls {
				next.Reset(time.Duration(5+rc.rng.IntN(40)) * time.Millisecond)
			}
		case <-kill.C:
			rc.killedAt = time.Now()
			p.kill()
			for m := range p.in { // what it wrote before it died
				rc.handle(p, m)
			}
			return
		}
	}
}

func (rc *recoveryCheck) call(p *recoveryProc, n, i int, restartable bool) {
	r := &tracked{id: fmt.Sprintf(`"c%d-%d"`, n, i), payload: restartable}
	secs, steps := 0.01+rc.rng.Float64()*0.5, 1+rc.rng.IntN(3)
	switch x := rc.rng.IntN(100); {
	case x < 40:
		r.kind = kindDone
	case x < 65:
		r.kind = kindFail
	case x < 80:
		r.kind, secs, steps = kindCancel, 3, 3
	default:
		r.kind, secs, steps = kindLong, 1.2, 3
	}
	r.want = fmt.Sprintf("countdown done: %d of %d steps", steps, steps)
	if r.kind == kindFail {
		r.want = fmt.Sprintf("countdown failed as asked: %d of %d steps", steps, steps)
	}
	rc.reqs[r.id] = r
	rc.ids = append(rc.ids, r.id)
	p.send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%g,"steps":%d,"fail":%v},"_meta":{"progressToken":"p%d-%d"}}}`,
		r.id, secs, steps, r.kind == kindFail, n, i)
}

// handle takes in a message of the live phase.
func (rc *recoveryCheck) handle(p *recoveryProc, m e2etest.Msg) {
	if m.Method == spec.MethodResumePolicy {
		pol := e2etest.PolicyOf(rc.t, m)
		r := rc.reqs[string(pol.RequestID)]
		if r == nil {
			rc.t.Errorf("%s: a policy for a request never sent: %s", rc.name, m.Raw)
			return
		}
		r.token, r.policyAt = pol.ResumeToken, time.Now()
		if r.kind == kindCancel {
			r.cancelSent = true
			p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"test"}}`, r.id)
			p.send(`{"jsonrpc":"2.0","id":"cx-%s","method":"requests/getStatus","params":{"requestId":%s,"resumeToken":%q}}`, unquote(r.id), r.id, r.token)
		}
		return
	}
	if m.Method != "" {
		return // progress
	}
	id := string(m.ID)
	switch {
	case strings.HasPrefix(id, `"cx-`):
		if r := rc.reqs[`"`+strings.TrimPrefix(id, `"cx-`)]; m.Error != nil && m.Error.Reason == spec.ReasonCancelled {
			r.cancelled = true
		}
	case strings.HasPrefix(id, `"ack-`):
		r := rc.reqs[`"`+strings.TrimPrefix(id, `"ack-`)]
		if m.Error == nil {
			r.acked = true
		} else {
			rc.t.Errorf("%s: the ack of %v answered %s", rc.name, r, m.Raw)
		}
	default:
		r := rc.reqs[id]
		if r == nil {
			rc.t.Errorf("%s: a response to nothing sent: %s", rc.name, m.Raw)
			return
		}
		rc.final(r, m, "live")
		if rc.rng.IntN(3) == 0 && r.token != "" {
			rc.ack(p, r)
		}
	}
}

// ack acknowledges r's final response with a getStatus, not waiting for it.
func (rc *recoveryCheck) ack(p *recoveryProc, r *tracked) {
	r.ackSent = true
	p.send(`{"jsonrpc":"2.0","id":"ack-%s","method":"requests/getStatus","params":{"requestId":%s,"resumeToken":%q,"_meta":{%q:%d}}}`,
		unquote(r.id), r.id, r.token, spec.MetaAck, r.seq)
}

// final records r's final response m, or checks it against the one received
// before (how: live, or resumed from which server). A request whose
// acknowledgement or cancel was sent, unconfirmed, before a kill may have been
// deleted then, but never comes back as anything else than it was.
func (rc *recoveryCheck) final(r *tracked, m e2etest.Msg, how string) {
	var res struct {
		IsError bool `json:"isError"`
	}
	text, reason := "", spec.Reason("")
	if m.Error != nil {
		reason = m.Error.Reason
	} else {
		text = e2etest.Text(m)
		_ = json.Unmarshal(m.Result, &res)
	}
	seq := finalSeq(m)
	switch {
	case r.final && (text != r.text || res.IsError != r.isError || reason != r.reason):
		rc.t.Errorf("%s: %s final response of %v: %s, not the one received before", rc.name, how, r, m.Raw)
	case reason == "" && (text != r.want || res.IsError != (r.kind == kindFail)):
		rc.t.Errorf("%s: %s final response of %v: %s, want %q", rc.name, how, r, m.Raw, r.want)
	case reason != "" && reason != spec.ReasonServerRestarted:
		rc.t.Errorf("%s: %s final response of %v: %s, an error", rc.name, how, r, m.Raw)
	}
	if !r.final {
		r.final, r.text, r.isError, r.reason = true, text, res.IsError, reason
	}
	r.seq = seq
}

// check asks the server for r after a restart and holds the answer to the rules.
func (rc *recoveryCheck) check(p *recoveryProc, r *tracked, n int) {
	t := rc.t
	if r.token == "" || r.gone {
		return // no policy came: the client cannot name it
	}
	st, serr := p.getStatus(r, 0)
	switch {
	case r.acked || r.cancelled:
		if serr == nil || serr.Reason != spec.ReasonNotFound {
			rc.deleted(n, "getStatus of %v: %+v %v, want not_found", r, st, serr)
		}
		r.gone = true
		return
	case serr != nil && serr.Reason == spec.ReasonNotFound && (r.cancelSent || r.ackSent):
		r.gone = true // cancelled or acked before the kill; the answer did not come
		return
	case serr != nil && serr.Reason == spec.ReasonNotFound && !r.final && r.policyAt.After(rc.killedAt.Add(-recentPolicy)):
		r.gone = true // started in the moments before the kill; its record not written yet
		return
	case serr != nil:
		t.Errorf("%s, server %d: getStatus of %v: %v", rc.name, n, r, serr)
		return
	}
	switch st.Status {
	case "processing":
		if r.final || !r.payload {
			t.Errorf("%s, server %d: %v is processing after the restart", rc.name, n, r)
		}
	case "completed":
		if r.kind == kindFail || (r.final && (r.isError || r.reason != "")) {
			t.Errorf("%s, server %d: %v reports completed", rc.name, n, r)
		}
	case "failed":
		if r.final && !r.isError && r.reason == "" {
			t.Errorf("%s, server %d: %v, completed, reports failed", rc.name, n, r)
		}
	default:
		t.Errorf("%s, server %d: %v: status %q", rc.name, n, r, st.Status)
	}
	p.send(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q}}`, r.id, r.token)
	m := p.response(r.id)
	if m.Error != nil && m.Error.Reason == spec.ReasonServerRestarted && st.Status != "failed" {
		t.Errorf("%s, server %d: %v answered server_restarted on resume, status %q", rc.name, n, r, st.Status)
	}
	rc.final(r, m, fmt.Sprintf("server %d: resumed", n))
	if rc.rng.IntN(3) == 0 {
		if _, serr := p.getStatus(r, r.seq); serr != nil {
			t.Errorf("%s, server %d: the ack of %v: %v", rc.name, n, r, serr)
		} else {
			r.ackSent, r.acked = true, true
		}
	}
}

// finalSeq returns the sequence number of a final response, in its result's
// or its error data's _meta.
func finalSeq(m e2etest.Msg) uint64 {
	if m.Error == nil {
		return m.Seq()
	}
	var e struct {
		Error struct {
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(m.Raw, &e) != nil || e.Error.Data == nil {
		return 0
	}
	return spec.ReadSeq(e.Error.Data)
}

func unquote(id string) string { return strings.Trim(id, `"`) }

// recoveryProc is a server subprocess on stdio whose log lines are read.
type recoveryProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	conn *stdio.Conn
	in   chan e2etest.Msg // closed when stdout ends
	out  chan struct{}    // closed with in
	logs chan struct{}    // closed when stderr ends
	once sync.Once
	seq  int

	mu    sync.Mutex // guards the fields below
	rerun []string   // the requests it ran again, from its log
	recov string     // its recovery log line
	warns []string   // its warnings and errors
	other strings.Builder
}

func startRecoveryProc(t *testing.T, args string) *recoveryProc {
	t.Helper()
	cmd := self(args)
	stdin, stdout := stdioPipes(t, cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &recoveryProc{t: t, cmd: cmd, conn: stdio.New(stdout, stdin, nil), in: make(chan e2etest.Msg, 4096), out: make(chan struct{}), logs: make(chan struct{})}
	go func() {
		defer close(p.out)
		defer close(p.in)
		for {
			raw, err := p.conn.Read(context.Background())
			if err != nil {
				return
			}
			var m e2etest.Msg
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Errorf("server sent invalid JSON %q: %v", raw, err)
				continue
			}
			m.Raw = raw
			p.in <- m
		}
	}()
	go func() {
		defer close(p.logs)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l struct {
				Level   string `json:"level"`
				Message string `json:"message"`
				Request string `json:"request"`
			}
			err := json.Unmarshal(sc.Bytes(), &l)
			p.mu.Lock()
			switch {
			case err != nil: // not a log line: a panic, a race report
				p.other.Write(sc.Bytes())
				p.other.WriteByte('\n')
			case l.Message == "running a restartable request again":
				p.rerun = append(p.rerun, l.Request)
			case strings.HasPrefix(l.Message, "recovered the requests"):
				p.recov = sc.Text()
			case l.Level == "warn" || l.Level == "error":
				p.warns = append(p.warns, sc.Text())
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *recoveryProc) send(format string, args ...any) {
	_ = p.conn.Write(context.Background(), fmt.Appendf(nil, format, args...)) // fails once killed
}

// response waits for the response to id; other messages (a resumed request's
// progress) are passed over.
func (p *recoveryProc) response(id string) e2etest.Msg {
	p.t.Helper()
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	for {
		select {
		case m, ok := <-p.in:
			if !ok {
				p.t.Fatalf("the server exited while waiting for the response to %s", id)
			}
			if m.IsResponse(id) {
				return m
			}
		case <-t.C:
			p.t.Fatalf("no response to %s within 20s", id)
		}
	}
}

// getStatus asks for r's status, acknowledging ack when it is not 0.
func (p *recoveryProc) getStatus(r *tracked, ack uint64) (e2etest.Status, *spec.Error) {
	p.t.Helper()
	p.seq++
	id := fmt.Sprintf(`"st-%d"`, p.seq)
	meta := ""
	if ack > 0 {
		meta = fmt.Sprintf(`,"_meta":{%q:%d}`, spec.MetaAck, ack)
	}
	p.send(`{"jsonrpc":"2.0","id":%s,"method":"requests/getStatus","params":{"requestId":%s,"resumeToken":%q%s}}`, id, r.id, r.token, meta)
	m := p.response(id)
	if m.Error != nil {
		return e2etest.Status{}, m.Error
	}
	var st e2etest.Status
	if err := json.Unmarshal(m.Result, &st); err != nil {
		p.t.Fatalf("getStatus result %s: %v", m.Raw, err)
	}
	return st, nil
}

// kill ends the server (SIGKILL) and waits for its output and its exit. What
// it wrote before stays in p.in.
func (p *recoveryProc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.out // all it wrote is in p.in
		<-p.logs
		_ = p.conn.Close()
		_ = p.cmd.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.other.Len() > 0 {
			p.t.Errorf("the server wrote to stderr:\n%s", p.other.String())
		}
	})
}

// reruns returns the requests the server ran again, once it is killed.
func (p *recoveryProc) reruns() []string {
	p.kill()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rerun
}

func (p *recoveryProc) recovered() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.warns {
		p.t.Log(w)
	}
	return p.recov
}
