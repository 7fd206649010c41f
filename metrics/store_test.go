package metrics_test

import (
	"testing"

	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/resume/storetest"
)

// A timed store is a store: the contract suite, through the wrapper.
func TestStoreTimerContract(t *testing.T) {
	timer := metrics.NewStoreTimer()
	storetest.Run(t, func(*testing.T) resume.Store { return timer.Wrap(memstore.New()) })
}

// An engine on a timed store: its calls are counted by operation.
func TestStoreTimerCounts(t *testing.T) {
	timer := metrics.NewStoreTimer()
	e := mustNew(t, timer.Wrap(memstore.New()))
	defer e.Close()
	h := metrics.Handler(e, timer)
	r, _, err := e.Start([]byte(`1`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Append(resume.KindNotification, "", func(uint64) []byte { return []byte(`{"jsonrpc":"2.0","method":"x"}`) }); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, h)
	for op, want := range map[string]float64{"put": 1, "append": 1, "records": 1, "delete": 0} {
		name := `mcp_resume_store_seconds_count{op="` + op + `"}`
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v; want %v", name, m[name], want)
		}
	}
}
