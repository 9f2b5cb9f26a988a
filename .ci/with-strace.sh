# Sourced by .ci/run. strace injects EIO into a child process's writes
# (store/sqlite TestInjectedEIO, daemon's EIO test): `-e inject=pwrite64:error=EIO`.
apt_need strace strace
