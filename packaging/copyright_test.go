package packaging

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Issue 30.4: the package's /usr/share/doc/ackd/copyright is in Debian's
// machine-readable format and names the licence of every module linked
// into /usr/bin/ackd (scripts/dist.sh installs packaging/deb/copyright;
// TestReleaseBuild checks it is in the .deb).
func TestDebianCopyright(t *testing.T) {
	b, err := os.ReadFile("deb/copyright")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.HasPrefix(text, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Errorf("copyright does not start with the copyright-format 1.0 Format: line")
	}
	files := map[string]bool{}
	used, defined := map[string]bool{}, map[string]bool{}
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(para, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
				fields[k] = v
			}
		}
		switch {
		case fields["Files"] != "":
			files[strings.TrimSuffix(fields["Files"], "/*")] = true
			if fields["Copyright"] == "" || fields["License"] == "" {
				t.Errorf("paragraph for %s lacks Copyright or License", fields["Files"])
			}
			for _, l := range strings.Split(fields["License"], " and ") {
				used[l] = true
			}
		case fields["License"] != "":
			defined[fields["License"]] = strings.Count(para, "\n") > 3
		}
	}
	for l := range used {
		if !defined[l] {
			t.Errorf("licence %s is used but has no stand-alone License paragraph with its text", l)
		}
	}
	if !files["*"] {
		t.Error("no Files: * paragraph for ackd itself")
	}
	if lic, err := os.ReadFile("../LICENSE"); err != nil || !strings.Contains(string(lic), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("the root LICENSE is not the Apache License 2.0: %v", err)
	}
	// Every module the ackd binary links.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "..").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var missing []string
	for _, m := range strings.Fields(string(out)) {
		if !files[m] && !slices.Contains(missing, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		t.Errorf("packaging/deb/copyright names no licence for the linked modules %s: add a Files: paragraph for each", strings.Join(missing, ", "))
	}
}
