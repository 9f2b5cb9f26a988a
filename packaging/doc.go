// Package packaging holds no code: its test runs the release build
// (scripts/dist.sh) and checks what it writes — the static binaries,
// SHA256SUMS and the Debian packages (contents, control fields, conffiles,
// maintainer scripts) — then installs the native package into a scratch
// root with dpkg, as the README's "Install on a VM" does, and checks the
// installed unit (systemd-analyze verify) and config (ackd config check),
// remove and purge. It is a package of its own so that the release build's
// minutes count against its own test timeout, in parallel with the rest.
package packaging
