#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: `initdb` and `pg_ctl`
# in a temporary directory, listening on a free loopback port only, with
# password authentication; stopped and removed when the command ends, however
# it ends. The command gets:
#   CUZK_TEST_PG_URL  postgres://cuzk:PASSWORD@127.0.0.1:PORT/cuzk_test
#   CUZK_TEST_PG_CTL  a pg_ctl command line for this cluster, to which a test
#                     appends `stop -m fast`, `start` or `restart -m fast`
#   CUZK_TEST_PG_CA   the PEM file of the CA that signed the server's certificate
#                     (made here with openssl, valid for 127.0.0.1 and localhost)
#   CUZK_TEST_PG_TLS_URL  CUZK_TEST_PG_URL with sslmode=verify-full against it
# The server runs with ssl=on: a URL without sslmode (prefer) gets TLS too.
# PostgreSQL refuses to run as root: as root, the cluster belongs to the
# system user cuzk-pg-test (created here when missing).
#   scripts/pg-test-cluster.sh cargo test --locked --test daemon -- job_store::
# CUZK_PG_PRELOAD names server libraries to preload (the fleet benchmark's
# pg_stat_statements: CUZK_PG_PRELOAD=pg_stat_statements).
set -euo pipefail

[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

bindir=$(pg_config --bindir 2> /dev/null || true)
if [ ! -x "$bindir/initdb" ]; then
    # Debian keeps the server's tools out of PATH, one directory per version.
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -n 1)
fi
[ -x "$bindir/initdb" ] || { echo "$0: no PostgreSQL server found (scripts/install-test-deps.sh installs it)" >&2; exit 1; }

dir=$(mktemp -d /tmp/cuzk-pg.XXXXXX)
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
    id -u cuzk-pg-test > /dev/null 2>&1 ||
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin cuzk-pg-test
    chown cuzk-pg-test "$dir"
    as_owner=(runuser -u cuzk-pg-test --)
fi
chmod 700 "$dir"

pg_ctl_line="${as_owner[*]} $bindir/pg_ctl -D $dir/data -l $dir/server.log -w"
cleanup() {
    $pg_ctl_line stop -m immediate > /dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

# A port nothing listens on now (another could take it before the server
# does; then the start fails and says so).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
printf '%s\n' "$password" > "$dir/password"
chmod 644 "$dir/password"
"${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U cuzk --auth=scram-sha-256 --pwfile="$dir/password" \
    --data-checksums --no-sync --encoding=UTF8 --locale=C.UTF-8 > "$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
rm "$dir/password"
# A CA of its own and a server certificate it signed, for ssl=on and the
# verify-full tests; the key readable by the server's user only.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=cuzk test CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" > "$dir/openssl.log" 2>&1 &&
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$dir/data/server.key" -out "$dir/server.csr" >> "$dir/openssl.log" 2>&1 &&
printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\n' > "$dir/server.ext" &&
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 2 -extfile "$dir/server.ext" -out "$dir/data/server.crt" >> "$dir/openssl.log" 2>&1 ||
    { cat "$dir/openssl.log" >&2; exit 1; }
rm "$dir/ca.key" "$dir/server.csr"
chmod 600 "$dir/data/server.key"
chmod 644 "$dir/ca.pem"
if [ "$(id -u)" -eq 0 ]; then
    chown cuzk-pg-test "$dir/data/server.key" "$dir/data/server.crt"
fi
# Loopback only, the socket in the cluster's directory (not /var/run): in the
# cluster's own configuration, so that a test's `pg_ctl start` keeps them.
cat >> "$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 200
shared_preload_libraries = '${CUZK_PG_PRELOAD:-}'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
EOF
$pg_ctl_line start > /dev/null || { cat "$dir/server.log" >&2; exit 1; }
PGPASSWORD="$password" "$bindir/psql" -q -h 127.0.0.1 -p "$port" -U cuzk -d postgres -c 'CREATE DATABASE cuzk_test' > /dev/null

if [ -n "${CUZK_PG_PRELOAD:-}" ]; then
    for extension in ${CUZK_PG_PRELOAD//,/ }; do
        PGPASSWORD="$password" "$bindir/psql" -q -h 127.0.0.1 -p "$port" -U cuzk -d cuzk_test \
            -c "CREATE EXTENSION IF NOT EXISTS $extension" > /dev/null
    done
fi
export CUZK_TEST_PG_URL="postgres://cuzk:$password@127.0.0.1:$port/cuzk_test"
export CUZK_TEST_PG_CTL="$pg_ctl_line"
export CUZK_TEST_PG_CA="$dir/ca.pem"
export CUZK_TEST_PG_TLS_URL="postgres://cuzk:$password@127.0.0.1:$port/cuzk_test?sslmode=verify-full&sslrootcert=$dir/ca.pem"
echo "== PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)"
status=0
"$@" || status=$?
exit "$status"
