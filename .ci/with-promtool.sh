# Sourced by .ci/run. promtool validates monitoring/ackd-rules.yml and the
# dashboard's queries (TestMonitoringPromtool); Debian ships it in the
# prometheus package. The package's own server is not used.
apt_need prometheus promtool
