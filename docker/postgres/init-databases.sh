#!/usr/bin/env bash
# Runs once, when the postgres service initialises an empty data volume (mounted into
# /docker-entrypoint-initdb.d by docker/compose.yaml): one login role and one database, owned by that role, per
# name in $EARMARK_PG_DATABASES (compose sets "prefect earmark"):
#   prefect  the Prefect server's database
#   earmark  the DuckLake catalogs (one metadata schema per dataset)
# Each role's password comes from $<NAME>_DB_PASSWORD (PREFECT_DB_PASSWORD, EARMARK_DB_PASSWORD).
# Adding a name later needs either a fresh volume or the same two statements run by hand (see docs/cluster.md).
set -eo pipefail

for name in ${EARMARK_PG_DATABASES:-prefect earmark}; do
  var="${name^^}_DB_PASSWORD"
  password="${!var}"
  if [ -z "$password" ]; then
    echo "init-databases: $var is not set (the password of the '$name' role)" >&2
    exit 1
  fi
  echo "init-databases: role and database '$name'"
  # psql's :"…" / :'…' interpolation quotes the identifier and the literal.
  psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
    -v name="$name" -v password="$password" <<'SQL'
CREATE ROLE :"name" LOGIN PASSWORD :'password';
CREATE DATABASE :"name" OWNER :"name";
SQL
done
