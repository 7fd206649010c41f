package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// callTask runs `call --task`: the call becomes a task of the server, whose id is
// printed alone (--detach), or polled until its result, which is printed as call
// prints one.
func callTask(ctx context.Context, c *client.Client, tool string, args map[string]any, detach, asJSON bool, stdout io.Writer, view *progressView) error {
	if !c.Tasks() {
		view.done()
		return fmt.Errorf("call --task %s: the server offers no tasks", tool)
	}
	tk, err := c.CallToolTask(ctx, tool, args, 0)
	var plain *client.NoTaskError
	if errors.As(err, &plain) {
		view.done()
		if detach {
			return fmt.Errorf("call --task %s: the server answered at once instead of making a task", tool)
		}
		view.line("the server answered at once (no task)")
		return printResult(stdout, plain.Result, asJSON, "call "+tool)
	}
	if err != nil {
		view.done()
		return fmt.Errorf("call --task %s: %w", tool, err)
	}
	if detach {
		view.done()
		fmt.Fprintln(stdout, tk.TaskID)
		return nil
	}
	view.line("task " + tk.TaskID + ": " + tk.Status)
	res, err := waitTask(ctx, c, tk, view)
	view.done()
	if err != nil {
		return err
	}
	return printResult(stdout, res, asJSON, "task "+tk.TaskID)
}

// waitTask follows a task to its result. Its events (tasks/stream) show its
// progress as a call's do, across lost connections; a question it asks, or its
// end, hands over to tasks/result, which answers its questions from the
// terminal and reads the result. A server without tasks/stream is polled with
// tasks/get instead.
func waitTask(ctx context.Context, c *client.Client, tk *client.Task, view *progressView) (*mcpgo.CallToolResult, error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var input atomic.Bool
	err := c.StreamTask(sctx, tk.TaskID, nil, func(ev client.TaskEvent) {
		if showEvent(ev, view) {
			input.Store(true)
			stop() // answered through tasks/result
		}
	})
	var serr *spec.Error
	switch {
	case ctx.Err() != nil:
		view.line("stopped waiting; the task runs on: mcp-resume task result " + tk.TaskID)
		return nil, errCancelled
	case errors.As(err, &serr) && serr.Code == spec.CodeMethodNotFound:
		if err := pollTask(ctx, c, tk, view); err != nil {
			return nil, err
		}
	case err != nil && !input.Load():
		return nil, fmt.Errorf("task %s: %w", tk.TaskID, err)
	}
	return taskResult(ctx, c, tk.TaskID, view)
}

// taskResult reads a task's result (tasks/result), asking again, a second
// apart for up to resultTries, while the server answers owner_unreachable: on
// an instance of a cluster whose other instance ran the task and was just
// lost, the task is unreachable until its lease runs out and it is claimed.
func taskResult(ctx context.Context, c *client.Client, id string, view *progressView) (*mcpgo.CallToolResult, error) {
	for try := 1; ; try++ {
		res, err := c.TaskResult(ctx, id)
		var serr *spec.Error
		if err == nil || !errors.As(err, &serr) || serr.Reason != spec.ReasonOwnerUnreachable || try == resultTries {
			if err != nil {
				return nil, fmt.Errorf("task %s: %w", id, err)
			}
			return res, nil
		}
		if try == 1 {
			view.line("task " + id + ": not reachable for now; asking again")
		}
		select {
		case <-ctx.Done():
			return nil, errCancelled
		case <-time.After(time.Second):
		}
	}
}

// resultTries bounds taskResult's tries.
const resultTries = 30

// showEvent shows a task's event; it reports whether the task asks a question.
func showEvent(ev client.TaskEvent, view *progressView) (asks bool) {
	switch ev.Type {
	case spec.EventTypeProgress:
		var p client.Progress
		if json.Unmarshal(ev.Payload, &p) == nil {
			view.progress(p)
		}
	case spec.EventTypeLog:
		var l struct {
			Level string          `json:"level"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal(ev.Payload, &l) == nil {
			view.line(l.Level + ": " + string(l.Data))
		}
	case spec.EventTypeStatus:
		var st struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		}
		if json.Unmarshal(ev.Payload, &st) == nil {
			view.line(strings.TrimSpace("task " + st.Status + " " + st.StatusMessage))
		}
	case spec.EventTypeInput:
		return true
	}
	return false
}

// pollTask polls a task until it needs input or has ended.
func pollTask(ctx context.Context, c *client.Client, tk *client.Task, view *progressView) error {
	last := tk.Status
	for !tk.Terminal() && tk.Status != "input_required" {
		select {
		case <-ctx.Done():
			view.line("stopped waiting; the task runs on: mcp-resume task result " + tk.TaskID)
			return errCancelled
		case <-time.After(tk.Poll()):
		}
		next, err := c.GetTask(ctx, tk.TaskID)
		if err != nil {
			return fmt.Errorf("task %s: %w", tk.TaskID, err)
		}
		if tk = next; tk.Status != last {
			view.line("task " + tk.TaskID + ": " + tk.Status)
			last = tk.Status
		}
	}
	if tk.Status == "cancelled" {
		return fmt.Errorf("task %s: cancelled", tk.TaskID)
	}
	return nil
}

const taskUsage = `usage: mcp-resume task [--url URL | --ws URL | --stdio CMD] [--json] get|result|watch|cancel ID
       mcp-resume task [--url URL | --ws URL | --stdio CMD] [--json] list

Reads the server's tasks (those "mcp-resume call --task" starts): get prints a
task's state, result waits for its result and prints it as call does (answering
its questions from stdin), watch follows its events (progress, logs, its end;
tasks/stream, across lost connections) without taking its result, cancel
cancels it, list lists this client's tasks. Flags go anywhere.

` + keyNote + `flags:
`

// task is `mcp-resume task`.
func task(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		tg     target
		asJSON bool
	)
	stderr = syncWriter(stderr)
	fs := tg.flagSet("task", taskUsage, stderr, &asJSON, "print the task or the result as JSON")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	op, id := fs.Arg(0), fs.Arg(1)
	if (op == "list" && fs.NArg() != 1) || (op != "list" && fs.NArg() != 2) {
		fs.Usage()
		return errors.New("task: want get|result|watch|cancel ID, or list")
	}
	view := newProgressView(stderr)
	defer view.done()
	ctx, c, done, err := tg.open(&client.Options{
		ClientInfo:  mcpgo.Implementation{Name: "mcp-resume task", Version: version},
		Elicitation: elicitFrom(stdin, stderr, view),
	}, stderr)
	if err != nil {
		return err
	}
	defer done()
	printTask := func(t *client.Task) {
		if asJSON {
			b, _ := json.MarshalIndent(t, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return
		}
		fmt.Fprintf(stdout, "task:     %s\nstatus:   %s\ncreated:  %s\nupdated:  %s\n", t.TaskID, t.Status, t.CreatedAt, t.LastUpdatedAt)
	}
	switch op {
	case "get", "cancel":
		get := c.GetTask
		if op == "cancel" {
			get = c.CancelTask
		}
		t, err := get(ctx, id)
		if err != nil {
			return fmt.Errorf("task %s: %w", op, err)
		}
		printTask(t)
	case "result":
		t, err := c.GetTask(ctx, id)
		if err != nil {
			return fmt.Errorf("task result: %w", err)
		}
		res, err := waitTask(ctx, c, t, view)
		if err != nil {
			return err
		}
		view.done()
		return printResult(stdout, res, asJSON, "task "+id)
	case "watch":
		var status string
		err := c.StreamTask(ctx, id, nil, func(ev client.TaskEvent) {
			if asJSON {
				b, _ := json.Marshal(ev)
				fmt.Fprintln(stdout, string(b))
			} else if showEvent(ev, view) {
				view.line("task " + id + " asks a question: answer it with mcp-resume task result " + id)
			}
			if ev.Type == spec.EventTypeStatus {
				var st struct{ Status string }
				_ = json.Unmarshal(ev.Payload, &st)
				status = st.Status
			}
		})
		view.done()
		switch {
		case ctx.Err() != nil:
			return errCancelled
		case err != nil:
			return fmt.Errorf("task watch: %w", err)
		case status == "failed":
			return fmt.Errorf("task %s: failed", id)
		}
		if status == "" {
			status = "ended (cancelled, or its end is no longer kept)"
		}
		fmt.Fprintln(stdout, "task "+id+": "+status)
	case "list":
		ts, err := c.ListTasks(ctx)
		if err != nil {
			return fmt.Errorf("task list: %w", err)
		}
		if asJSON {
			b, _ := json.MarshalIndent(ts, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return nil
		}
		for _, t := range ts {
			fmt.Fprintf(stdout, "%s  %-14s  %s\n", t.TaskID, t.Status, t.CreatedAt)
		}
	default:
		fs.Usage()
		return fmt.Errorf("task: unknown operation %q", op)
	}
	return nil
}
