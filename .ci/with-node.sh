# Sourced by .ci/run. The real @slack/bolt for e2e/bolt_test.go: Node ≥ 20
# must already be on the machine (Bolt 5 needs it; Debian's nodejs package is
# too old, so it is never installed from apt), and examples/bolt's exact
# modules come from its committed package-lock.json.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "with-node: node and npm (Node >= 20) are required for the Bolt end-to-end test; they are not on PATH" >&2
	exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 20)); then
	echo "with-node: Node $(node --version) is too old: @slack/bolt 5 needs Node >= 20" >&2
	exit 1
fi
echo "== npm ci in examples/bolt (node $(node --version), npm $(npm --version))"
(cd examples/bolt && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
export ACKD_TEST_BOLT_DIR="$PWD/examples/bolt"
