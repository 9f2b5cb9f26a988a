// Command ackd answers Slack within its 3-second deadline after durably
// recording each request, then performs the side effects from an outbox
// with leases, fencing, backoff and a dead-letter state.
//
// main only starts the command line (package cli); it embeds schema.sql
// here because go:embed cannot reach a parent folder.
package main

import (
	_ "embed"
	"os"

	"github.com/ackd/ackd/cli"
)

//go:embed schema.sql
var schema string

func main() {
	os.Exit(cli.Execute(schema, os.Args[1:], os.Stdout, os.Stderr))
}
