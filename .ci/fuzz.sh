#!/usr/bin/env bash
# Runs each fuzz target of the Slack request surface (ingress/fuzz_test.go) for
# a few seconds: the signature check and the three parsers must never panic
# and must keep their invariants. A failure leaves the crashing input under
# ingress/testdata/fuzz/<target>/, where `go test ./ingress/` replays it.
#
# Usage: .ci/fuzz.sh            (5s per target)
#        FUZZTIME=2m .ci/fuzz.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzztime="${FUZZTIME:-5s}"
for target in FuzzVerify FuzzParseEnvelope FuzzParseCommand FuzzParseInteraction; do
	echo "== fuzz ${target} (${fuzztime})"
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzztime}" ./ingress/
done
