# Sourced by .ci/run. promtool validates monitoring/ackd-rules.yml and the
# dashboard's queries (TestMonitoringPromtool); Debian ships it in the
# prometheus package, whose own server is not wanted: stop it if the
# package started one.
if ! command -v promtool >/dev/null 2>&1; then
	apt_need prometheus promtool
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
		systemctl stop prometheus || true
	fi
fi
