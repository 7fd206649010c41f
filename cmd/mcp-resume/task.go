package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
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

// waitTask polls a task until it needs input or has ended, then reads its result.
func waitTask(ctx context.Context, c *client.Client, tk *client.Task, view *progressView) (*mcpgo.CallToolResult, error) {
	last := tk.Status
	for !tk.Terminal() && tk.Status != "input_required" {
		select {
		case <-ctx.Done():
			view.line("stopped waiting; the task runs on: mcp-resume task result " + tk.TaskID)
			return nil, errCancelled
		case <-time.After(tk.Poll()):
		}
		next, err := c.GetTask(ctx, tk.TaskID)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", tk.TaskID, err)
		}
		if tk = next; tk.Status != last {
			view.line("task " + tk.TaskID + ": " + tk.Status)
			last = tk.Status
		}
	}
	if tk.Status == "cancelled" {
		return nil, fmt.Errorf("task %s: cancelled", tk.TaskID)
	}
	res, err := c.TaskResult(ctx, tk.TaskID)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", tk.TaskID, err)
	}
	return res, nil
}

const taskUsage = `usage: mcp-resume task [--url URL | --ws URL | --stdio CMD] [--json] get|result|cancel ID
       mcp-resume task [--url URL | --ws URL | --stdio CMD] [--json] list

Reads the server's tasks (those "mcp-resume call --task" starts): get prints a
task's state, result waits for its result and prints it as call does (answering
its questions from stdin), cancel cancels it, list lists this client's tasks.

flags:
`

// task is `mcp-resume task`.
func task(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		tg     target
		asJSON bool
	)
	stderr = syncWriter(stderr)
	fs := flag.NewFlagSet("task", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, taskUsage); fs.PrintDefaults() }
	tg.flags(fs)
	fs.BoolVar(&asJSON, "json", false, "print the task or the result as JSON")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	op, id := fs.Arg(0), fs.Arg(1)
	if (op == "list" && fs.NArg() != 1) || (op != "list" && fs.NArg() != 2) {
		fs.Usage()
		return errors.New("task: want get|result|cancel ID, or list")
	}
	dial, err := tg.dialer(stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	view := newProgressView(stderr)
	defer view.done()
	c, err := connectClient(ctx, dial, &client.Options{
		ClientInfo:  mcpgo.Implementation{Name: "mcp-resume task", Version: version},
		Elicitation: elicitFrom(stdin, stderr, view),
	})
	if err != nil {
		return err
	}
	defer c.Close()
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
