#!/usr/bin/env bash
# Install (if needed) and start a local PostgreSQL for the tuner's distributed-study test.
# Prints the URL to export as RLTRITON_TUNE_TEST_PG_URL on the last line of stdout.
# Debian; needs root. Idempotent: re-running reuses the running cluster.
set -euo pipefail

PORT="${PGPORT:-5432}"
DB="${RLTRITON_TUNE_TEST_PG_DB:-rltriton_tune_test}"

log() { echo "start-postgres: $*" >&2; }

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "installing postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

VERSION="$(ls /usr/lib/postgresql | sort -V | tail -n1)"
CLUSTER=main
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$VERSION $CLUSTER"; then
    log "creating cluster $VERSION/$CLUSTER on port $PORT"
    pg_createcluster -p "$PORT" "$VERSION" "$CLUSTER" >&2
fi
CONF="/etc/postgresql/$VERSION/$CLUSTER"
# Listen on loopback only and trust local connections (a throwaway test server).
sed -i "s/^#\?listen_addresses.*/listen_addresses = '127.0.0.1'/" "$CONF/postgresql.conf"
cat > "$CONF/pg_hba.conf" <<HBA
local all all trust
host  all all 127.0.0.1/32 trust
host  all all ::1/128 trust
HBA
PORT="$(pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1==v && $2==c {print $3}')"

if pg_lsclusters -h | awk -v v="$VERSION" -v c="$CLUSTER" '$1==v && $2==c {print $4}' | grep -q online; then
    pg_ctlcluster "$VERSION" "$CLUSTER" reload >&2
else
    log "starting cluster $VERSION/$CLUSTER"
    pg_ctlcluster "$VERSION" "$CLUSTER" start >&2
fi

for _ in $(seq 1 30); do
    if su postgres -c "psql -h 127.0.0.1 -p $PORT -d postgres -Atc 'select 1'" >/dev/null 2>&1; then
        break
    fi
    sleep 1
done

if ! su postgres -c "psql -h 127.0.0.1 -p $PORT -d postgres -Atc \"select 1 from pg_database where datname='$DB'\"" | grep -q 1; then
    log "creating database $DB"
    su postgres -c "createdb -h 127.0.0.1 -p $PORT $DB" >&2
fi

echo "postgresql://postgres@127.0.0.1:$PORT/$DB"
