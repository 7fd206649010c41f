package conformance

import (
	"context"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// completer answers completion/complete from fixed word lists: the arguments of
// test_prompt_with_arguments and the id of the resource template. Values start
// with the typed prefix (case-insensitively); anything else completes to nothing.
type completer struct{}

var (
	_ server.PromptCompletionProvider   = completer{}
	_ server.ResourceCompletionProvider = completer{}
)

// promptWords are the candidates per argument of test_prompt_with_arguments.
var promptWords = map[string][]string{
	"arg1": {"paris", "park", "party", "test", "testValue1"},
	"arg2": {"world", "word", "testValue2"},
}

// templateIDs are the candidates for {id} of test://template/{id}/data.
var templateIDs = []string{"1", "12", "123"}

func (completer) CompletePromptArgument(_ context.Context, name string, arg mcpgo.CompleteArgument, _ mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	if name != "test_prompt_with_arguments" {
		return complete(nil, arg.Value), nil
	}
	return complete(promptWords[arg.Name], arg.Value), nil
}

func (completer) CompleteResourceArgument(_ context.Context, uri string, arg mcpgo.CompleteArgument, _ mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	if uri != templateURI || arg.Name != "id" {
		return complete(nil, arg.Value), nil
	}
	return complete(templateIDs, arg.Value), nil
}

// complete returns the words that start with prefix; values is never nil.
func complete(words []string, prefix string) *mcpgo.Completion {
	values := []string{}
	for _, w := range words {
		if strings.HasPrefix(strings.ToLower(w), strings.ToLower(prefix)) {
			values = append(values, w)
		}
	}
	return &mcpgo.Completion{Values: values, Total: len(values)}
}
