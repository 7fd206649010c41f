// Package conformance is the server that the official MCP conformance suite,
// @modelcontextprotocol/conformance 0.1.16, drives in server mode: the fixed set of
// tools, resources and prompts its scenarios call by name, built on mcp-go. Serve
// Server over any transport; the transport's own scenarios (SSE polling, multiple
// streams, DNS rebinding) test the transport, not this package.
//
// What each scenario needs from it:
//
//   - server-initialize, ping: nothing beyond mcp-go (name, version, capabilities
//     tools, resources with subscribe, prompts, logging, completions).
//   - logging-set-level: the logging capability; mcp-go keeps the level per session.
//   - completion-complete: completion/complete for ref/prompt
//     test_prompt_with_arguments (arg1, arg2) and the {id} of the resource
//     template, answered from a small fixed word list by prefix.
//   - tools-list: every tool has a name, a description and an input schema.
//   - tools-call-simple-text, -image, -audio, -embedded-resource, -mixed-content:
//     test_simple_text, test_image_content (1x1 PNG), test_audio_content (a
//     one-sample WAV, audio/wav), test_embedded_resource, test_multiple_content_types
//     (text, image and an application/json embedded resource).
//   - tools-call-error: test_error_handling returns a result with isError set.
//   - tools-call-with-logging: test_tool_with_logging sends three info
//     notifications/message, 50ms apart, through the session's level filter.
//   - tools-call-with-progress: test_tool_with_progress sends notifications/progress
//     0, 50 and 100 of 100, 50ms apart, when the call carries a progress token.
//   - tools-call-sampling: test_sampling {prompt} sends sampling/createMessage
//     (one user text message, maxTokens 100) and returns "LLM response: <text>".
//   - tools-call-elicitation: test_elicitation {message} sends elicitation/create
//     (username and email, both required) and returns
//     "User response: action=<action>, content=<json>".
//   - elicitation-sep1034-defaults: test_elicitation_sep1034_defaults asks with a
//     default for every primitive type (string, integer, number, enum, boolean).
//   - elicitation-sep1330-enums: test_elicitation_sep1330_enums asks with the five
//     enum shapes (untitled and titled single-select, legacy enumNames, untitled
//     and titled multi-select).
//   - json-schema-2020-12: json_schema_2020_12_tool lists a raw input schema that
//     keeps $schema, $defs and additionalProperties: false.
//   - server-sse-polling: test_reconnection closes the call's stream with
//     mcp.CloseStream, waits briefly and returns; the client must fetch the
//     result by reconnecting with Last-Event-ID. Only the Streamable HTTP
//     transport of this module can close a stream; elsewhere the result says so.
//   - server-sse-multiple-streams, dns-rebinding-protection: transport only.
//   - resources-list, -read-text, -read-binary, -templates-read: test://static-text,
//     test://static-binary (image/png blob), test://watched-resource and the
//     template test://template/{id}/data, whose JSON text carries the id.
//   - resources-subscribe, -unsubscribe: acknowledged by mcp-go (the resources
//     capability has subscribe). The watched resource never changes, so no
//     notifications/resources/updated is ever sent.
//   - prompts-list, prompts-get-*: test_simple_prompt,
//     test_prompt_with_arguments {arg1, arg2}, test_prompt_with_embedded_resource
//     {resourceUri} and test_prompt_with_image.
//
// The package writes its own Go; the reference it follows is the suite's
// examples/servers/typescript/everything-server.ts and src/scenarios/server.
package conformance
