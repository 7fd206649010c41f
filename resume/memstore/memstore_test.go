package memstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/resume/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	storetest.Run(t, func(*testing.T) resume.Store { return memstore.New() })
}
