// Package packaging holds no code: its test runs the release build
// (scripts/dist.sh) and checks what it writes — the static binaries,
// SHA256SUMS and the Debian packages (contents, control fields, conffiles,
// maintainer scripts) — then follows docs/howto/install-on-a-vm.md's
// install commands literally in a scratch root (dpkg --root, the credential
// files as the page writes them, ackd chrooted into the root) and starts the
// installed unit as systemd would, until /healthz answers; and checks the
// installed unit (systemd-analyze verify), remove and purge. It is a package of its own so that the release build's
// minutes count against its own test timeout, in parallel with the rest.
package packaging
