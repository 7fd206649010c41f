package spec

// methods are the request methods IsMethod knows.
var methods = map[string]bool{}

func init() {
	for _, m := range []string{
		MethodInitialize, "ping", "tools/list", MethodToolsCall, "resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
		MethodGetStatus, MethodResume, MethodServerDiscover, MethodSubscriptionsListen,
		MethodTasksGet, MethodTasksCancel, MethodTasksStream, MethodTasksUpdate, "tasks/result", "tasks/list",
	} {
		methods[m] = true
	}
}

// IsMethod reports whether method is a request method of MCP (either era,
// tasks of 2025-11-25 and of the Tasks extension included) or of SEP-975. The
// metrics name any other "_OTHER", so that made-up methods make a bounded
// number of series.
func IsMethod(method string) bool { return methods[method] }
