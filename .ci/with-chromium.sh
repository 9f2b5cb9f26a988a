# Sourced by .ci/run. Debian's chromium, driven headless (--no-sandbox: CI
# runs as root) over the DevTools protocol by chromedp in
# e2e/console_test.go: the operator console in a real browser. The test
# reads the browser's path from ACKD_TEST_CHROMIUM.
apt_need chromium chromium
ACKD_TEST_CHROMIUM=$(command -v chromium)
export ACKD_TEST_CHROMIUM
