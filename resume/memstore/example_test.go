package memstore_test

import (
	"context"
	"fmt"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// printer is a Sink that prints what a request writes to it.
type printer struct{}

func (*printer) Write(_ context.Context, m resume.Message) error {
	fmt.Printf("#%d %s\n", m.Seq, m.Data)
	return nil
}

// The engine on its in-memory store, without MCP: a request queues its messages
// while no client is attached, and a client that comes back with the request's
// token gets them in order, then the final response.
func ExampleNew() {
	eng, err := resume.New(context.Background(), memstore.New(), nil)
	if err != nil {
		panic(err)
	}
	defer eng.Close()

	req, token, _ := eng.Start([]byte(`7`), nil) // no sink: nobody is attached yet
	for i := 1; i <= 2; i++ {
		_, _ = req.Append(resume.KindProgress, "p", func(seq uint64) []byte {
			return fmt.Appendf(nil, `{"progress":%d}`, i)
		})
	}

	h, err := eng.Lookup(token, []byte(`7`)) // the client comes back with its token
	if err != nil {
		panic(err)
	}
	sink := &printer{}
	_ = h.Attach(sink, 0)
	_, _ = req.Complete(false, func(seq uint64) []byte { return []byte(`{"result":"done"}`) })
	h.Detach(sink)
	// Output:
	// #1 {"progress":1}
	// #2 {"progress":2}
	// #3 {"result":"done"}
}
