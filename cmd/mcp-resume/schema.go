package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// inputSchema is what call checks of a tool's input schema: the arguments'
// names and JSON types, which are required, and whether others are allowed.
type inputSchema struct {
	Properties map[string]struct {
		Type typeList `json:"type"`
		Enum []any    `json:"enum"`
	} `json:"properties"`
	Required             []string        `json:"required"`
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

// typeList is a schema's "type": one name or several.
type typeList []string

func (t *typeList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = typeList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*t = many
	return nil
}

// describe lists a schema's arguments for `mcp-resume tools`:
// "seconds (number), text (string, required)".
func (s *inputSchema) describe() string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		var attrs []string
		if t := s.Properties[name].Type; len(t) > 0 {
			attrs = append(attrs, strings.Join(t, "|"))
		}
		if slices.Contains(s.Required, name) {
			attrs = append(attrs, "required")
		}
		if len(attrs) == 0 {
			parts = append(parts, name)
			continue
		}
		parts = append(parts, name+" ("+strings.Join(attrs, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

// check fits args (as parsed from key=value, with the text each came from in
// raw) to the schema: a value the schema wants as a string is the text as typed
// (5 → "5"); then every required argument must be there, every value of its
// type (or one of its enum), and no argument unknown to a schema that allows
// no others. It returns what is wrong, all of it, in one error, and warns of
// arguments the schema does not name but allows (a typo, most likely).
func (s *inputSchema) check(tool string, args map[string]any, raw map[string]string) (warn string, err error) {
	var problems, unknown []string
	for name, v := range args {
		p, known := s.Properties[name]
		if !known {
			if string(s.AdditionalProperties) == "false" {
				problems = append(problems, fmt.Sprintf("%s takes no argument %q", tool, name))
			} else if len(s.Properties) > 0 {
				unknown = append(unknown, name)
			}
			continue
		}
		if _, isString := v.(string); !isString && len(p.Type) == 1 && p.Type[0] == "string" {
			if text, ok := raw[name]; ok {
				args[name] = text
				v = text
			}
		}
		if len(p.Type) > 0 && !slices.ContainsFunc(p.Type, func(t string) bool { return isType(v, t) }) {
			problems = append(problems, fmt.Sprintf("%s must be %s, got %s", name, strings.Join(p.Type, " or "), show(v)))
			continue
		}
		if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
			problems = append(problems, fmt.Sprintf("%s must be one of %v, got %s", name, p.Enum, show(v)))
		}
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is required", name))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		warn = fmt.Sprintf("%s names no argument %s (its arguments: %s); sent anyway", tool, strings.Join(unknown, ", "), s.describe())
	}
	if len(problems) == 0 {
		return warn, nil
	}
	sort.Strings(problems)
	return warn, fmt.Errorf("%s: %s (its arguments: %s)", tool, strings.Join(problems, "; "), s.describe())
}

// isType reports whether v, as decoded from JSON, is of JSON Schema type t.
func isType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "null":
		return v == nil
	}
	return true // a type this check does not know: the server decides
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
