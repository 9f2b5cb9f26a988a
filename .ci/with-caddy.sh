# Sourced by .ci/run. The real Caddy (Debian's caddy package, 2.6) runs
# systemd/Caddyfile in front of ackd in daemon/caddy_test.go: HTTPS on
# private loopback ports with Caddy's internal CA, its state in the test's
# own directories. The package's own service (which would take ports 80
# and 443 and the admin endpoint) is not wanted: stop it if the package
# started one.
if ! command -v caddy >/dev/null 2>&1; then
	apt_need caddy caddy
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet caddy 2>/dev/null; then
		systemctl stop caddy || true
	fi
fi
