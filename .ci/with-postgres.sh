# Sourced by .ci/run. A throwaway PostgreSQL cluster for the store/postgres
# tests, the contract suite and the multi-replica e2e suite: initdb as the
# postgres user (initdb refuses root) in a temporary directory owned by it,
# listening on 127.0.0.1 on a private port with its socket in that
# directory, one database, stopped and removed at exit.
#
# Exports:
#   ACKD_TEST_POSTGRES_URL  postgres://ackd@127.0.0.1:PORT/ackd_test?sslmode=disable
#   ACKD_TEST_PG_CTL        the pg_ctl binary (the stop/start test)
#   ACKD_TEST_PGDATA        the cluster's data directory
#   ACKD_TEST_PG_USER       the OS user that owns the cluster (postgres)

# Debian puts the server binaries in /usr/lib/postgresql/<major>/bin, off PATH.
pg_path() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do PATH="$d:$PATH"; done
}
pg_path
apt_need postgresql initdb pg_ctl postgres
pg_path

pg_bin=$(dirname "$(command -v pg_ctl)")
pg_dir=$(mktemp -d /tmp/ackd-pg.XXXXXX)
chown postgres: "$pg_dir"
chmod 700 "$pg_dir"
# A private port: a random one below the ephemeral range that nothing
# answers on (bash's /dev/tcp connects, or fails when the port is free).
# Below the kernel's ephemeral range as this machine sets it (a client's
# source port is never taken from below it, so no reconnect loop can connect
# a socket to itself on the server's port): 10000 up to its low end.
read -r pg_eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || pg_eph_lo=32768
if [ "${pg_eph_lo}" -le 10100 ]; then
	echo "ip_local_port_range starts at ${pg_eph_lo}: no room below it for a PostgreSQL port" >&2
	exit 1
fi
for _ in $(seq 50); do
	pg_port=$((10000 + RANDOM % (pg_eph_lo - 10000)))
	(exec 3<>"/dev/tcp/127.0.0.1/${pg_port}") 2>/dev/null || break
done

pg_as() { (cd "$pg_dir" && runuser -u postgres -- "$@"); }
pg_as "$pg_bin/initdb" -D "$pg_dir/data" -U ackd --auth=trust -E UTF8 --no-instructions >/dev/null
# Settings for a test cluster on a small shared machine: enough connections
# for three replicas and the tests, fsync left on (the durability tests mean it).
cat >>"$pg_dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${pg_port}
unix_socket_directories = '${pg_dir}'
max_connections = 200
shared_buffers = 64MB
CONF
pg_as "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -t 60 start >/dev/null
ci_cleanup+=("runuser -u postgres -- '$pg_bin/pg_ctl' -D '$pg_dir/data' -m immediate -w stop >/dev/null 2>&1; rm -rf '$pg_dir'")
pg_as "$pg_bin/createdb" -h "$pg_dir" -p "$pg_port" -U ackd ackd_test

export ACKD_TEST_POSTGRES_URL="postgres://ackd@127.0.0.1:${pg_port}/ackd_test?sslmode=disable"
export ACKD_TEST_PG_CTL="$pg_bin/pg_ctl"
export ACKD_TEST_PGDATA="$pg_dir/data"
export ACKD_TEST_PG_USER=postgres
echo "postgres ${pg_port} in ${pg_dir}"
