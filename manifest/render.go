package manifest

import (
	"bytes"
	"encoding/json"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAML writes the manifest as YAML, the notes first as comments (Slack's
// "Create an app → From a manifest" dialog takes YAML or JSON and ignores
// comments).
func (r Result) YAML() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# Slack app manifest made by `ackd manifest` for this configuration.\n")
	for _, n := range r.Notes {
		buf.WriteString("# NOTE: " + strings.ReplaceAll(n, "\n", " ") + "\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(r.Manifest); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// JSON writes the manifest as indented JSON. JSON has no comments: the
// notes are the caller's to print elsewhere.
func (r Result) JSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.Manifest); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
