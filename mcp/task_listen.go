package mcp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// notifications/tasks through subscriptions/listen (the Tasks extension of
// 2026-07-28): a listen whose filter names tasks gets each task's state
// (a DetailedTask, as tasks/get gives it) at once and at every change, tagged
// with the listen's id, until the client ends the listen. A filter that also asks
// for list changes is left to mcp-go, which does not know tasks: those task ids
// are not acknowledged, and the client polls them.

// taskListen reads a subscriptions/listen's filter: the task ids it names, and
// whether it names anything else.
func taskListen(params json.RawMessage) (ids []string, others bool) {
	var p struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil, false
	}
	for k, v := range p.Notifications {
		if k == "taskIds" {
			_ = json.Unmarshal(v, &ids)
			continue
		}
		if string(v) != "false" && string(v) != "null" && string(v) != "[]" {
			others = true
		}
	}
	return ids, others
}

// listenTasks serves a subscriptions/listen that names tasks only.
func (tk *sessionTasks) listenTasks(m *spec.Message, st Stream, mr *modernReq, ids []string) {
	c := tk.c
	key := string(m.ID)
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(c.ctx))
	cl := &call{c: c, st: st, id: m.ID, ctx: ctx, cancel: cancel, modern: mr, pol: &noPolicy}
	var closed, dup bool
	c.update(func(s *sessionState) {
		if closed = s.closed; closed {
			return
		}
		if _, dup = s.running[key]; !dup {
			s.running[key] = cl
		}
	})
	switch {
	case closed:
		cancel(errConnectionLost)
		return
	case dup:
		cancel(errClientCancel)
		c.replyError(st, m.ID, spec.NewError(spec.CodeInvalidRequest, spec.ReasonDuplicateID, "a request with id "+key+" is already in flight on this connection"))
		return
	}
	c.s.wg.Go(func() {
		defer func() {
			cancel(nil)
			c.update(func(s *sessionState) {
				if s.running[key] == cl {
					delete(s.running, key)
				}
			})
		}()
		cl.watchTasks(ids)
	})
}

// watchTasks acknowledges the tasks it can read, then sends their states.
func (cl *call) watchTasks(ids []string) {
	c := cl.c
	type watched struct {
		tid  *taskID
		last string
	}
	var known []*watched
	var acked []string
	for _, s := range ids {
		tid, ok := decodeTaskID(s)
		if !ok {
			continue
		}
		if r, _, err := c.att.lookup(tid.Token, tid.ID); r == nil || err != nil {
			continue // another principal's, gone, or refused (rate limited): not acknowledged
		}
		known = append(known, &watched{tid: tid})
		acked = append(acked, s)
	}
	meta := map[string]json.RawMessage{spec.MetaSubscriptionID: json.RawMessage(cl.id)}
	ack, _ := json.Marshal(map[string]any{"_meta": meta, "notifications": map[string]any{"taskIds": acked}})
	c.send(cl.st, KindNotification, spec.EncodeRequest(nil, "notifications/subscriptions/acknowledged", ack))
	tick := time.NewTicker(taskPollInterval)
	defer tick.Stop()
	for {
		for _, w := range known {
			state := c.tasks.taskState(w.tid)
			var obj map[string]json.RawMessage
			if json.Unmarshal(state, &obj) != nil {
				continue
			}
			var status string
			_ = json.Unmarshal(obj["status"], &status)
			if status == w.last {
				continue
			}
			w.last = status
			delete(obj, "resultType")
			obj["_meta"], _ = json.Marshal(meta)
			b, _ := json.Marshal(obj)
			c.send(cl.st, KindNotification, spec.EncodeRequest(nil, "notifications/tasks", b))
		}
		select {
		case <-cl.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// taskState is what tasks/get would answer for tid now.
func (tk *sessionTasks) taskState(tid *taskID) json.RawMessage {
	c := tk.c
	r, err := c.s.eng.LookupAs(tid.Token, tid.ID, c.principal)
	if err != nil {
		status := "failed"
		if errorsIsCancelled(err) {
			status = "cancelled"
		}
		return taskObject(tid, status, nil, c.s.eng.Options())
	}
	return tk.taskGet(r, tid)
}
