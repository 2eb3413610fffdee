#!/bin/sh
# Creates Temporal's databases (and orga's store database) on the compose PostgreSQL and brings
# their schemas up to the server's version. Safe to run on every `docker compose up`: an
# existing database is kept, `setup-schema -v 0.0` leaves a stamped schema alone and
# `update-schema` applies only what is missing.
set -eu
: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -u "$POSTGRES_USER" \
    -p "${DB_PORT:-5432}" "$@"
}

create() {
  if output=$(sql --db "$1" create 2>&1); then
    echo "created database $1"
  elif echo "$output" | grep -q "already exists"; then
    echo "database $1 exists"
  else
    echo "$output" >&2
    exit 1
  fi
}

schemas=/etc/temporal/schema/postgresql/v12
for database in temporal temporal_visibility; do
  create "$database"
done
sql --db temporal setup-schema -v 0.0
sql --db temporal update-schema -d "$schemas/temporal/versioned"
sql --db temporal_visibility setup-schema -v 0.0
sql --db temporal_visibility update-schema -d "$schemas/visibility/versioned"
# orga's store (payloads kept out of history, cut texts, the effect ledger): its own database
# on the same server; the workers create its tables.
create "${ORGA_STORE_DATABASE:-orga}"
echo "schemas ready"
