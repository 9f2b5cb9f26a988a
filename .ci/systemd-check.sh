#!/usr/bin/env bash
# Checks systemd/ackd.service with systemd-analyze (systemd 252 or newer):
#   1. `systemd-analyze verify` prints nothing and exits 0;
#   2. `systemd-analyze security --offline=true` rates the overall exposure at
#      2.0 or lower (--threshold counts tenths: 20 = 2.0);
# and the backup example, systemd/ackd-backup.service with its timer:
#   3. `systemd-analyze verify` of both prints nothing and exits 0, and the
#      binary accepts the `ackd backup --force FILE` the service runs.
#
# verify insists that ExecStart's binary exists and is executable, and a CI
# machine has no /usr/bin/ackd. So the script builds ackd into a temporary
# directory, checks that the unit's command line is one the binary accepts, and
# verifies a temporary copy of the unit whose only change is the ExecStart path.
# (`verify --root=DIR` is no way out: the default dependencies such as
# sysinit.target must then exist under DIR too.) The security analysis does not
# look at the binary and runs on the unit as shipped.
#
# Usage: .ci/systemd-check.sh          (from anywhere; needs go and systemd-analyze)
#        ACKD_BIN=./ackd .ci/systemd-check.sh   (use a binary already built)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

unit=systemd/ackd.service
installed_bin=/usr/bin/ackd
max_exposure_tenths=20

fail() {
	echo "systemd-check: FAIL: $*" >&2
	exit 1
}

command -v systemd-analyze >/dev/null 2>&1 ||
	fail "systemd-analyze not found; install systemd (Debian/Ubuntu: apt-get install systemd) — this check cannot be skipped"
[[ -f $unit ]] || fail "$unit not found"

echo "systemd-check: $(systemd-analyze --version | head -n1)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the binary ExecStart names ------------------------------------------------
if [[ -n ${ACKD_BIN:-} ]]; then
	bin=$(realpath "$ACKD_BIN")
	[[ -x $bin ]] || fail "ACKD_BIN=$ACKD_BIN is not an executable file"
else
	command -v go >/dev/null 2>&1 || fail "go not found (needed to build ackd; or set ACKD_BIN)"
	bin=$tmp/ackd
	echo "systemd-check: building ackd"
	go build -o "$bin" . || fail "go build failed"
fi

# The unit runs `ackd serve --config …`: the binary must know both.
"$bin" serve --help >"$tmp/serve-help" 2>&1 || fail "'ackd serve --help' failed: $(cat "$tmp/serve-help")"
grep -q -- '--config' "$tmp/serve-help" || fail "'ackd serve' has no --config flag, but $unit passes one"

# --- verify --------------------------------------------------------------------
# The copy keeps the file name (verify derives the unit name from it).
n=$(grep -c "^ExecStart=$installed_bin " "$unit" || true)
[[ $n == 1 ]] || fail "expected exactly one 'ExecStart=$installed_bin …' line in $unit, found $n"
sed "s#^ExecStart=$installed_bin #ExecStart=$bin #" "$unit" >"$tmp/ackd.service"

# verify exits 0 even for unknown keys and unparsable values (it logs them and
# ignores the line), so any output at all counts as a failure.
set +e
verify_out=$(systemd-analyze verify "$tmp/ackd.service" 2>&1)
verify_rc=$?
set -e
if [[ $verify_rc -ne 0 || -n $verify_out ]]; then
	printf '%s\n' "$verify_out" >&2
	fail "systemd-analyze verify $unit (exit $verify_rc, output above)"
fi
echo "systemd-check: verify: clean"

# --- the backup service and timer ------------------------------------------------
for f in systemd/ackd-backup.service systemd/ackd-backup.timer; do
	[[ -f $f ]] || fail "$f not found"
done
grep -q "$installed_bin backup --force " systemd/ackd-backup.service ||
	fail "systemd/ackd-backup.service does not run '$installed_bin backup --force FILE'"
"$bin" backup --help >"$tmp/backup-help" 2>&1 || fail "'ackd backup --help' failed: $(cat "$tmp/backup-help")"
grep -q -- '--force' "$tmp/backup-help" || fail "'ackd backup' has no --force flag, but ackd-backup.service passes one"
# ExecStart is /bin/sh -c '… ackd backup …' (the weekday in the file name):
# the path inside the shell command is rewritten like the daemon's.
mkdir "$tmp/backup"
sed "s#$installed_bin #$bin #" systemd/ackd-backup.service >"$tmp/backup/ackd-backup.service"
cp systemd/ackd-backup.timer "$tmp/backup/"
set +e
verify_out=$(systemd-analyze verify "$tmp/backup/ackd-backup.service" "$tmp/backup/ackd-backup.timer" 2>&1)
verify_rc=$?
set -e
if [[ $verify_rc -ne 0 || -n $verify_out ]]; then
	printf '%s\n' "$verify_out" >&2
	fail "systemd-analyze verify of the backup service and timer (exit $verify_rc, output above)"
fi
echo "systemd-check: verify ackd-backup.service and .timer: clean"

# --- security ------------------------------------------------------------------
set +e
security_out=$(systemd-analyze security --offline=true --no-pager \
	--threshold="$max_exposure_tenths" "$unit" 2>&1)
security_rc=$?
set -e
overall=$(grep -m1 'Overall exposure level' <<<"$security_out" || true)
[[ -n $overall ]] || {
	printf '%s\n' "$security_out" >&2
	fail "no 'Overall exposure level' line in systemd-analyze security output"
}
limit="$((max_exposure_tenths / 10)).$((max_exposure_tenths % 10))"
# "→ Overall exposure level for ackd.service: 1.1 OK 🙂" → "1.1"
exposure=$(sed -E 's/.*: ([0-9]+\.[0-9]+).*/\1/' <<<"$overall")
echo "systemd-check: security: overall exposure $exposure (limit $limit)"
if [[ $security_rc -ne 0 ]]; then
	# Show what is still exposed (the ✗ rows), then fail.
	grep '✗' <<<"$security_out" >&2 || printf '%s\n' "$security_out" >&2
	fail "overall exposure $exposure is above $limit (systemd-analyze security exit $security_rc)"
fi
echo "systemd-check: OK"
