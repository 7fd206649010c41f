package main

import "flag"

// parseAnywhere parses fs's flags wherever they stand among args, before or
// after the verb and its arguments, as git and kubectl take them
// (`mcp-resume task result --url URL ID`); "--" ends the flags. The other
// arguments, in order, are fs.Args() after it.
func parseAnywhere(fs *flag.FlagSet, args []string) error {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		left := fs.Args()
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			rest = append(rest, left...) // after "--": arguments only
			break
		}
		if len(left) == 0 {
			break
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
	return fs.Parse(append([]string{"--"}, rest...))
}
