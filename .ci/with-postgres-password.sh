# Sourced by .ci/run, after with-postgres.sh (for the server binaries). A
# second throwaway PostgreSQL cluster that asks for a password
# (scram-sha-256, on 127.0.0.1 only: no trust, no peer), so that the
# PostgreSQL store tests run once against a server like a managed one: a
# test that only passes on a trusting server fails here. .ci/run runs
# ./store/postgres/ against it; the rest of the suite uses the trusting one.
#
# Exports:
#   ACKD_TEST_POSTGRES_PASSWORD_URL  postgres://ackd:PASSWORD@127.0.0.1:PORT/ackd_test?sslmode=disable

# Sourced before or after with-postgres.sh (the glob's order): find the
# server binaries, and install them, on its own.
for pgpw_d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do PATH="$pgpw_d:$PATH"; done
apt_need postgresql initdb pg_ctl postgres
for pgpw_d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do PATH="$pgpw_d:$PATH"; done
pgpw_bin=$(dirname "$(command -v pg_ctl)")
pgpw_dir=$(mktemp -d /tmp/ackd-pgpw.XXXXXX)
chown postgres: "$pgpw_dir"
chmod 700 "$pgpw_dir"
# Below the kernel's ephemeral range as this machine sets it (a client's
# source port is never taken from below it, so no reconnect loop can connect
# a socket to itself on the server's port): 10000 up to its low end.
read -r pgpw_eph_lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || pgpw_eph_lo=32768
if [ "${pgpw_eph_lo}" -le 10100 ]; then
	echo "ip_local_port_range starts at ${pgpw_eph_lo}: no room below it for a PostgreSQL port" >&2
	exit 1
fi
for _ in $(seq 50); do
	pgpw_port=$((10000 + RANDOM % (pgpw_eph_lo - 10000)))
	(exec 3<>"/dev/tcp/127.0.0.1/${pgpw_port}") 2>/dev/null || break
done
pgpw_password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
printf '%s\n' "$pgpw_password" >"$pgpw_dir/pwfile"
chown postgres: "$pgpw_dir/pwfile"
chmod 600 "$pgpw_dir/pwfile"

pgpw_as() { (cd "$pgpw_dir" && runuser -u postgres -- "$@"); }
# The superuser ackd gets a password, and every connection must give it.
pgpw_as "$pgpw_bin/initdb" -D "$pgpw_dir/data" -U ackd --pwfile="$pgpw_dir/pwfile" \
	--auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --no-instructions >/dev/null
rm -f "$pgpw_dir/pwfile"
cat >"$pgpw_dir/data/pg_hba.conf" <<HBA
# Passwords only, loopback only.
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
HBA
cat >>"$pgpw_dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${pgpw_port}
unix_socket_directories = '${pgpw_dir}'
password_encryption = scram-sha-256
max_connections = 100
shared_buffers = 32MB
CONF
pgpw_as "$pgpw_bin/pg_ctl" -D "$pgpw_dir/data" -l "$pgpw_dir/log" -w -t 60 start >/dev/null
ci_cleanup+=("runuser -u postgres -- '$pgpw_bin/pg_ctl' -D '$pgpw_dir/data' -m immediate -w stop >/dev/null 2>&1; rm -rf '$pgpw_dir'")
PGPASSWORD="$pgpw_password" pgpw_as "$pgpw_bin/createdb" -h 127.0.0.1 -p "$pgpw_port" -U ackd ackd_test

export ACKD_TEST_POSTGRES_PASSWORD_URL="postgres://ackd:${pgpw_password}@127.0.0.1:${pgpw_port}/ackd_test?sslmode=disable"
echo "postgres (password auth) ${pgpw_port} in ${pgpw_dir}"
