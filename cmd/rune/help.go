package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/rune-org/rune/internal/suggest"
)

// printUsage lists the commands, aligned.
func printUsage(w io.Writer) {
	cmds := commands()
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	fmt.Fprintln(w, "Usage: rune <command> [arguments]\n\nCommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'rune help <command>' for a command's flags. Docs: README.md and docs/")
}

// unknownCommand says that name is no command, suggesting the nearest.
func unknownCommand(w io.Writer, name string) {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "rune: unknown command %q", name)
	if s := suggest.Closest(name, names); s != "" {
		fmt.Fprintf(w, "; did you mean %q?", s)
	}
	fmt.Fprintln(w, "\nRun 'rune help' for the list of commands.")
}

// cmdHelp is `rune help [COMMAND]`: a command's help, as `rune COMMAND -h`.
func cmdHelp(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 {
		printUsage(env.stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" {
			return c.run(ctx, env, []string{"-h"})
		}
	}
	unknownCommand(env.stderr, args[0])
	env.exit = exitInvalid
	return nil
}

// cmdVersion prints the module's version, the commit it was built from and
// the Go version.
func cmdVersion(_ context.Context, env *cliEnv, _ []string) error {
	fmt.Fprintln(env.stdout, versionLine(debug.ReadBuildInfo()))
	return nil
}

func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "rune (no build information) " + runtime.Version()
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	line := "rune " + version
	switch {
	case rev == "":
		line += ", commit unknown"
	default:
		line += ", commit " + rev[:min(len(rev), 12)]
		if modified {
			line += " (modified)"
		}
		if when != "" {
			line += " of " + when
		}
	}
	return line + ", " + bi.GoVersion
}

// helpFor makes fs's help the command's own text followed by its flags,
// aligned, and keeps the flag package from printing anything itself: parse
// errors are returned, with a suggestion, for runMain to print once.
func helpFor(fs *flag.FlagSet) {
	out := fs.Output()
	if out == io.Discard {
		return // done already
	}
	own := fs.Usage
	fs.Usage = func() {
		// own prints the command's text on stderr and calls
		// fs.PrintDefaults, whose unaligned list goes nowhere.
		fs.SetOutput(io.Discard)
		own()
		printFlags(out, fs)
	}
	fs.SetOutput(io.Discard)
}

// redactURLs hides the passwords of the URLs in a comma-separated list.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				parts[i] = u.Redacted()
			}
		}
	}
	return strings.Join(parts, ",")
}

// envName finds the environment variable a flag's usage says it defaults to.
var envName = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)`)

// secretFlags never show their value, even when it is a built-in default.
var secretFlags = map[string]bool{"token": true, "password": true, "secret": true}

// printFlags lists fs's flags in two aligned columns. Secrets are never
// shown: a token's default (from the environment) is named by its
// variable, and passwords in URLs are masked.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	type row struct{ name, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if strings.Contains(arg, " ") { // backquotes around an example, not an argument name
			arg, usage = "value", f.Usage
		}
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		switch m := envName.FindStringSubmatch(f.Usage); {
		case isZeroDefault(f):
		case secretFlags[f.Name] && m != nil:
			usage += " (default: from $" + m[1] + ")"
		case secretFlags[f.Name]:
			usage += " (default: set)"
		case arg == "string":
			usage += fmt.Sprintf(" (default %q)", redactURLs(f.DefValue))
		default:
			usage += " (default " + f.DefValue + ")"
		}
		rows = append(rows, row{name, usage})
		width = max(width, len(name))
	})
	if len(rows) == 0 {
		return
	}
	width = min(width, 28)
	fmt.Fprintln(w, "\nFlags:")
	const lineWidth = 100
	for _, r := range rows {
		indent := strings.Repeat(" ", width+4)
		first := fmt.Sprintf("  %-*s  ", width, r.name)
		if len(r.name) > width {
			fmt.Fprintf(w, "  %s\n", r.name)
			first = indent
		}
		fmt.Fprintln(w, first+wrap(r.usage, lineWidth-len(indent), indent))
	}
}

// wrap breaks s into lines of at most n bytes at spaces, indenting every
// line after the first.
func wrap(s string, n int, indent string) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && col+1+len(word) > n {
			b.WriteString("\n" + indent)
			col = 0
		} else if i > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// isZeroDefault reports whether f's default is its type's zero value, which
// goes without saying.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// flagSuggestion is a hint for a flag parse error: the nearest flag to an
// undefined one.
func flagSuggestion(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	name = strings.TrimLeft(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := suggest.Closest(name, names); s != "" {
		return fmt.Sprintf("; did you mean --%s?", s)
	}
	return ""
}
