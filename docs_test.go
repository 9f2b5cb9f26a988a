package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shellBlocks returns the ```sh blocks of a Markdown file, with backslash
// continuations joined, one command line per entry.
func shellBlocks(tb testing.TB, path string) (blocks [][]string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?ms)^\\s*```sh\\n(.*?)^\\s*```").FindAllStringSubmatch(string(b), -1) {
		text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(m[1], " ")
		var lines []string
		for _, l := range strings.Split(text, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// ackdInvocation matches a command line's ackd binary and captures its
// arguments up to a comment, a pipe or the next command.
var ackdInvocation = regexp.MustCompile(`(?:^|[\s'"])(?:\./|/usr/local/bin/|/usr/bin/|/tmp/)?ackd(?:-bench)?\s+([^#|;&]*)`)

// Issue 16.4, 16.9, 16.11: the README and examples/README.md build the
// binary before using it, every ackd command line they show parses (the
// subcommand exists and takes those flags), the Go version is go.mod's, and
// there is one test command.
func TestDocsCommandsParse(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	quick := text[strings.Index(text, "## Quickstart"):strings.Index(text, "## How a request flows")]
	build, serve := strings.Index(quick, "go build -o ackd ."), strings.Index(quick, "./ackd serve")
	if build < 0 || serve < 0 || build > serve {
		t.Errorf("the quickstart does not build ./ackd before running ./ackd serve")
	}
	if strings.Contains(text, "go run . serve") || strings.Contains(text, "go run . send") {
		t.Errorf("the README still runs ackd with go run")
	}
	if !strings.Contains(quick, "ackd completion") {
		t.Errorf("the quickstart does not mention ackd completion")
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil || !strings.Contains(quick, "Go "+string(goVersion[1])) {
		t.Errorf("the quickstart does not name go.mod's Go version %s", goVersion[1])
	}

	tests, serves := 0, 0
	for _, doc := range []string{"README.md", filepath.Join("examples", "README.md")} {
		for _, block := range shellBlocks(t, doc) {
			for _, line := range block {
				if line == "go test -race -count=1 ./..." {
					tests++
				}
				if strings.HasPrefix(line, "journalctl") || strings.Contains(line, "systemctl ") {
					continue // the unit's name, not the binary
				}
				for _, m := range ackdInvocation.FindAllStringSubmatch(line, -1) {
					args := strings.Fields(strings.NewReplacer(`'`, "", `"`, "").Replace(m[1]))
					// "go build -o ackd ." and "install … ackd /usr/local/bin/ackd" name the file.
					if len(args) == 0 || args[0] == "." || strings.HasPrefix(args[0], "/") {
						continue
					}
					if doc == "README.md" && len(args) > 0 && args[0] == "serve" && strings.Contains(line, "SLACK_SIGNING_SECRET=") {
						serves++
					}
					// The leading words are the command path: cobra answers
					// --help of a mistyped subcommand with its parent's help.
					path, words := "ackd", args
					if len(words) >= 2 && words[0] == "--config" { // a global flag before the command
						words = words[2:]
					}
					for _, a := range words {
						if !regexp.MustCompile(`^[a-z]+$`).MatchString(a) {
							break
						}
						path += " " + a
					}
					r := procRun(t, procEnv(), append(args, "--help")...)
					if r.Code != 0 || !strings.Contains(r.Stdout, "Usage:\n  "+path+" ") {
						t.Errorf("%s: `ackd %s` does not parse: exit %d\n%s%s", doc, strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
					}
				}
			}
		}
	}
	if tests != 1 {
		t.Errorf("the README gives the test command %d times in shell blocks, want once", tests)
	}
	if serves != 1 {
		t.Errorf("the README gives %d commands that run the daemon with a secret on SQLite, want one (the quickstart's)", serves)
	}
}

// Issue 16.9: the example systemd/ackd.toml, installed unedited, does not
// act on every message of every channel.
func TestExampleUnitConfigIsQuietUnedited(t *testing.T) {
	t.Parallel()
	d := procServe(t, procServeOpts{Config: "systemd/ackd.toml", DB: filepath.Join(t.TempDir(), "ackd.db")})
	out := procMustRun(t, procEnv(), "send", "--listen", d.Addr, "examples/message.json").Stdout
	if out != "200 OK (ackd: ignored (unrouted), nothing recorded)\n" {
		t.Errorf("a plain message in some channel, with the example config as installed: %q, want ignored", out)
	}
	d.stop()
}
