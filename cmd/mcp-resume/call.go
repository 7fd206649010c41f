package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/dial"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// errCancelled is returned by call after Ctrl-C cancelled the remote request.
var errCancelled = errors.New("cancelled")

// target is where call and status connect: one of --url, --ws, --stdio.
type target struct {
	url, ws, stdio string
	wsPing         time.Duration
	env            envList // the --stdio child's variables beyond stdio.BaseEnv
	login          loginFlags
	session        *oauth.Session // the OAuth client of the server (nil: an API key, or stdio)
	ep             dial.Endpoint  // what the flags name, once dialer checked them
}

func (t *target) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.url, "url", "", "Streamable HTTP endpoint (default http://127.0.0.1:8080/mcp)")
	fs.StringVar(&t.ws, "ws", "", "WebSocket endpoint (ws://host:port/ws)")
	fs.DurationVar(&t.wsPing, "ws-ping", ws.ClientPing, "with --ws: ping a connection that carried nothing for this long; one whose pong is half as late is taken for dead and the call resumed on a new connection (on HTTP, a stream silent for 2.5 times the keepalive it asks of the server, 5 s, is)")
	fs.StringVar(&t.stdio, "stdio", "", "start this command and speak MCP on its stdin and stdout (split on spaces)")
	fs.Var(&t.env, "env", "with --stdio: "+envUsage)
	t.login.register(fs)
}

// flagSet returns the flag set of a command that is a client of one server:
// the target's flags and --json (into asJSON, told as jsonHelp), its usage
// text usage, its errors on stderr.
func (t *target) flagSet(name, usage string, stderr io.Writer, asJSON *bool, jsonHelp string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	t.flags(fs)
	fs.BoolVar(asJSON, "json", false, jsonHelp)
	return fs
}

// open connects to the target as a command's client: ctx ends on an
// interrupt, the client's spans and metrics go where the environment says,
// and a --stdio child's stderr and tracing's complaints go to log. done closes
// the client and stops the rest.
func (t *target) open(opts *client.Options, log io.Writer) (ctx context.Context, c *client.Client, done func(), err error) {
	dial, err := t.dialer(log)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, stopTracing := traceClient(ctx, t, opts, log)
	c, err = t.connect(ctx, dial, opts)
	if err != nil {
		stopTracing()
		stop()
		return nil, nil, nil, err
	}
	return ctx, c, func() {
		_ = c.Close()
		stopTracing()
		stop()
	}, nil
}

// endpoint is the server the flags name: --ws's URL, --url's (by default
// http://127.0.0.1:8080/mcp), or --stdio's command; each URL checked for its
// flag's schemes.
func (t *target) endpoint() (dial.Endpoint, error) {
	n := 0
	for _, v := range []string{t.url, t.ws, t.stdio} {
		if v != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return dial.Endpoint{}, errors.New("give one of --url, --ws, --stdio")
	case t.ws != "":
		return checkURL("--ws", t.ws, dial.WebSocket)
	case t.stdio != "":
		argv := strings.Fields(t.stdio)
		if len(argv) == 0 {
			return dial.Endpoint{}, errors.New("--stdio needs a command")
		}
		return dial.Command(argv...)
	}
	return checkURL("--url", cmp.Or(t.url, "http://127.0.0.1:8080/mcp"), dial.HTTP)
}

// dialer returns the Dialer of the target's server (t.ep, which it sets);
// a child's stderr goes to stderr. The server's credentials are the API key
// in MCP_RESUME_API_KEY, else its OAuth logins (t.session). Over Streamable
// HTTP the connections share one session on the server, however often the
// client connects again, and a lost stream ends the connection (the client
// resumes its calls on the next).
func (t *target) dialer(stderr io.Writer) (client.Dialer, error) {
	ep, err := t.endpoint()
	if err != nil {
		return nil, err
	}
	t.ep = ep
	o := &dial.Options{Stderr: stderr, Env: t.env, WSPing: t.wsPing,
		FailOnStreamLoss: true, Keep: &httptransport.KeptSession{}}
	if ep.Kind() != dial.Stdio {
		if o.Header = clientKey(); o.Header == nil {
			s, err := t.login.session(ep.URL(), stderr, nil)
			if err != nil {
				return nil, err
			}
			o.Wrap, t.session = wrap(s), s
		}
	}
	return ep.Dialer(o), nil
}

const callUsage = `usage: mcp-resume call [--url URL | --ws URL | --stdio CMD] [--json] [-v] TOOL [key=value ...]

Calls TOOL and prints its result. Values are JSON when they parse as JSON
(5, true, {"a":1}, "quoted"), strings otherwise. The call survives connection
loss within the server's maxWait: it is resumed on a new connection, and
stderr says so as it happens ("connection lost, reconnecting (attempt N)",
then "resumed" once the server took the call up again). A server
restart (with --data-dir or --nats-url) keeps a finished call's result; a call
still running then fails, unless the server runs its tool again (--restartable),
when its progress starts over. A server that answers that the tool runs on (a
deferred answer: serve --answer-within) is waited for: call awaits the call's
own result with the tool the answer names, and says so on stderr. Progress
shows as a bar on a terminal, as lines otherwise (stderr). Ctrl-C cancels the
request on the server and exits.

exit status: 0 the tool's result was printed; 1 the tool ran and reported an
error (its result printed); 2 anything else that left no result (bad
arguments, no connection, the server refused or lost the call); 130
interrupted (Ctrl-C, SIGTERM: the call cancelled on the server).

` + keyNote + `flags:
`

// call is `mcp-resume call`.
func call(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		tg      target
		asJSON  bool
		verbose bool
		asTask  bool
		detach  bool
	)
	stderr = syncWriter(stderr) // shared by the progress view and a --stdio child
	fs := tg.flagSet("call", callUsage, stderr, &asJSON, "print the whole result as JSON")
	fs.BoolVar(&verbose, "v", false, "print the request's id and resume token (for mcp-resume status) and each resume, on stderr")
	fs.BoolVar(&asTask, "task", false, "run the call as a task of the server (it outlives this command; see mcp-resume task)")
	fs.BoolVar(&detach, "detach", false, "with --task: print the task id alone on stdout and exit")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return errors.New("call: no tool named")
	}
	tool := fs.Arg(0)
	arguments, rawArgs, err := parseArgsRaw(fs.Args()[1:])
	if err != nil {
		return err
	}
	bar := newProgressView(stderr)
	var why atomic.Pointer[string] // what ended the last connection, when it says more than "lost"
	opts := &client.Options{
		ClientInfo:  mcpgo.Implementation{Name: "mcp-resume call", Version: version},
		Elicitation: elicitFrom(stdin, stderr, bar),
		OnConnectionLost: func(err error) {
			s := ""
			if silent := (*httptransport.SilenceError)(nil); errors.As(err, &silent) {
				s = silent.Error()
			}
			why.Store(&s)
		},
		OnReconnecting: func(attempt int, err error) { bar.line(reconnecting(attempt, why.Load(), err)) },
	}
	// A --stdio child's log lines go above the bar, not into it.
	ctx, c, done, err := tg.open(opts, bar.lines())
	if err != nil {
		return err
	}
	defer done()
	if err := checkArgs(ctx, c, tool, arguments, rawArgs, bar); err != nil {
		return err
	}
	if asTask || detach {
		return callTask(ctx, c, tool, arguments, detach, asJSON, stdout, bar)
	}
	deferred := 0
	res, err := c.CallTool(ctx, tool, arguments, &client.CallOptions{
		Progress: bar.progress,
		Policy: func(p client.Policy) {
			if verbose {
				bar.line(fmt.Sprintf("request %s is resumable (maxWait %v); resume token %s", p.RequestID, p.MaxWait, p.Token))
			}
		},
		ResumeAccepted: func() { bar.line("resumed") },
		// A deferred answer is no result: the client awaits the call's own.
		OnDeferred: func(d client.Deferred) {
			if deferred++; deferred == 1 || verbose {
				bar.line(fmt.Sprintf("the server answered that the tool runs on; waiting for its result (%s)", d.Tool))
			}
		},
	})
	bar.done()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "cancelled: the request was cancelled on the server")
			return errCancelled
		}
		if re := (*client.ResumeError)(nil); errors.As(err, &re) && re.Reason() == spec.ReasonNotFound {
			return fmt.Errorf("call %s: %w\n%s", tool, err, hintNotFound)
		}
		return fmt.Errorf("call %s: %w", tool, err)
	}
	return printResult(stdout, res, asJSON, "call "+tool)
}

// hintNotFound follows a resume answered not_found: the token is right (the
// server gave it), so the server lost the request.
const hintNotFound = "hint: the server no longer knows the call; if it restarted, it may have run without --data-dir (or --nats-url), which keep requests across a restart. Whether the tool ran to its end is unknown."

// reconnecting is the line call prints as it dials again after a lost
// connection: why it was lost (when the transport said more than that) on the
// first attempt, why the previous attempt failed on the next ones.
func reconnecting(attempt int, why *string, lastErr error) string {
	s := "connection lost"
	if attempt == 1 && why != nil && *why != "" {
		s += " (" + *why + ")"
	}
	s += fmt.Sprintf(", reconnecting (attempt %d)", attempt)
	if lastErr != nil {
		s += ": the last attempt failed: " + lastErr.Error()
	}
	return s
}

// errToolFailed is matched by the error of a command whose tool's result has
// isError: the tool ran and said it failed (exit status 1).
var errToolFailed = errors.New("the tool reported an error")

// printResult prints a tool's result: its text, or with asJSON the whole result.
// A result with isError is an error matching errToolFailed (what names the
// command).
func printResult(stdout io.Writer, res *mcpgo.CallToolResult, asJSON bool, what string) error {
	if asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, ct := range res.Content {
			if tc, ok := ct.(mcpgo.TextContent); ok {
				fmt.Fprintln(stdout, tc.Text)
			} else {
				b, _ := json.Marshal(ct)
				fmt.Fprintln(stdout, string(b))
			}
		}
	}
	if res.IsError {
		return fmt.Errorf("%s: %w", what, errToolFailed)
	}
	return nil
}

// parseArgs turns key=value pairs into tool arguments.
func parseArgs(pairs []string) (map[string]any, error) {
	out, _, err := parseArgsRaw(pairs)
	return out, err
}

// parseArgsRaw is parseArgs with the text each value came from.
func parseArgsRaw(pairs []string) (map[string]any, map[string]string, error) {
	out := map[string]any{}
	raw := map[string]string{}
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, nil, fmt.Errorf("argument %q: want key=value", kv)
		}
		raw[k] = v
		var j any
		if json.Unmarshal([]byte(v), &j) == nil {
			out[k] = j
		} else {
			out[k] = v
		}
	}
	return out, raw, nil
}

// checkArgs checks a call's arguments against the tool's input schema before
// the call is sent, and says what is wrong. A server that cannot list its
// tools is left to judge the call itself.
func checkArgs(ctx context.Context, c *client.Client, tool string, args map[string]any, raw map[string]string, bar *progressView) error {
	all, err := listTools(ctx, c)
	if err != nil {
		return nil
	}
	for _, t := range all {
		if t.Name == tool {
			warn, err := t.schema.check(tool, args, raw)
			if warn != "" {
				bar.line("warning: " + warn)
			}
			return err
		}
	}
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name
	}
	return fmt.Errorf("the server has no tool %q (it has: %s)", tool, strings.Join(names, ", "))
}

// elicitFrom answers elicitation requests from lines of stdin: a single-field
// form takes the line as that field, any other form a JSON object. An empty line
// or the end of stdin declines.
func elicitFrom(stdin io.Reader, stderr io.Writer, view *progressView) func(context.Context, mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	if stdin == nil {
		return nil
	}
	lines := bufio.NewScanner(stdin)
	return func(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
		var fields []string
		if schema, ok := req.Params.RequestedSchema.(map[string]any); ok {
			if props, ok := schema["properties"].(map[string]any); ok {
				for k := range props {
					fields = append(fields, k)
				}
			}
		}
		view.line(fmt.Sprintf("the server asks: %s (fields: %s; empty line declines)", req.Params.Message, strings.Join(fields, ", ")))
		decline := &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionDecline}}
		if !lines.Scan() || strings.TrimSpace(lines.Text()) == "" {
			return decline, nil
		}
		text := strings.TrimSpace(lines.Text())
		content := map[string]any{}
		if len(fields) == 1 {
			content[fields[0]] = text
		} else if err := json.Unmarshal([]byte(text), &content); err != nil {
			return nil, fmt.Errorf("answer is not a JSON object: %w", err)
		}
		return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: mcpgo.ElicitationResponseActionAccept, Content: content}}, nil
	}
}

const statusUsage = `usage: mcp-resume status [--url URL | --ws URL | --stdio CMD] [--json] ID [TOKEN | -]

Asks the server for the state of a request (requests/getStatus) by its JSON-RPC
id (as sent: "c-...-1" with its quotes, or a number) and its resume token, as
printed by "mcp-resume call -v". The token is read from the environment variable
` + tokenEnv + ` when TOKEN is left out, and from stdin (one line) when it is -;
either keeps it out of the process list, where an argument is visible to every
user of the machine.

` + keyNote + `flags:
`

// tokenEnv names the environment variable status reads a resume token from.
const tokenEnv = "MCP_RESUME_TOKEN"

// status is `mcp-resume status`.
func status(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		tg     target
		asJSON bool
	)
	stderr = syncWriter(stderr)
	fs := tg.flagSet("status", statusUsage, stderr, &asJSON, "print the result as JSON")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return errors.New("status: want ID and a token")
	}
	id := parseID(fs.Arg(0))
	token, err := statusToken(fs.Args()[1:], stdin)
	if err != nil {
		return err
	}
	ctx, c, done, err := tg.open(&client.Options{ClientInfo: mcpgo.Implementation{Name: "mcp-resume status", Version: version}}, stderr)
	if err != nil {
		return err
	}
	defer done()
	st, err := c.Status(ctx, id, token)
	var ended *spec.Error
	if errors.As(err, &ended) && (ended.Reason == spec.ReasonCancelled || ended.Reason == spec.ReasonExpired) {
		// An ended request is a state to report, not a failure of the command.
		fmt.Fprintf(stdout, "request:           %s\nstatus:            %s\n", id, ended.Reason)
		return nil
	}
	if err != nil {
		return fmt.Errorf("status %s: %w", id, err)
	}
	if asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "request:           %s\nstatus:            %s\npending message:   %v\ninput requested:   %v\n",
		id, st.Status, st.HasPendingMessage, st.HasInputRequest)
	return nil
}

// statusToken returns the resume token status was given (args: none, or TOKEN):
// from tokenEnv when it was left out, from stdin when it is "-", or as it is.
func statusToken(args []string, stdin io.Reader) (string, error) {
	if len(args) == 0 {
		if tok := strings.TrimSpace(os.Getenv(tokenEnv)); tok != "" {
			return tok, nil
		}
		return "", errors.New("status: no token: give it as TOKEN, as - to read it from stdin, or in " + tokenEnv)
	}
	switch arg := args[0]; arg {
	case "":
		return "", errors.New("status: the token is empty")
	case "-":
		if stdin == nil {
			return "", errors.New("status: no stdin to read the token from")
		}
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if tok := strings.TrimSpace(line); tok != "" {
			return tok, nil
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("empty")
		}
		return "", fmt.Errorf("status: reading the token from stdin: %w", err)
	default:
		return arg, nil
	}
}

// lockedWriter serializes writes to a writer that is not safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// syncWriter returns w made safe for concurrent writes (a file already is).
func syncWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}
