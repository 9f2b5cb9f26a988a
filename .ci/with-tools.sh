# Sourced by .ci/run. Command-line tools the tests drive: the sqlite3 CLI
# (reading the views while ackd runs, holding the write lock from another
# process), chattr (a read-only database file that root cannot write),
# systemd-analyze (the unit check).
apt_need sqlite3 sqlite3
apt_need e2fsprogs chattr
apt_need systemd systemd-analyze
