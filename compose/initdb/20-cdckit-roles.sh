#!/bin/sh
# cdckit's least-privilege roles for the demo table (connectors/sql/roles.sql, mounted at
# /cdckit/roles.sql): cdckit_cdc (LOGIN REPLICATION; the job and Debezium) and cdckit_reader
# (read-only; verify and status), plus the support tables, truncate trigger and publication, so
# cdckit never connects as the superuser. The variables are those `cdckit config roles-sql -c
# compose/config/cdckit.yaml` binds (tests/unit/compose keeps them equal). With a database of your
# own, run that command's output as its admin instead. Postgres runs this once, with the volume.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v cdc_role=cdckit_cdc -v reader_role=cdckit_reader -v tables=public.customers \
  -v heartbeat_table=public.cdckit_heartbeat -v signal_table=public.cdckit_signal \
  -v truncate_table=public.cdckit_truncates -v truncate_trigger=cdckit_truncate_71c2516518 \
  -v publication=cdckit -f "${CDCKIT_ROLES_SQL:-/cdckit/roles.sql}"
# Passwords from the environment (compose/.env), bound as literals by psql, never in a file here.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v cdc_pw="$CDCKIT_CDC_PASSWORD" -v reader_pw="$CDCKIT_READER_PASSWORD" <<'SQL'
ALTER ROLE cdckit_cdc PASSWORD :'cdc_pw';
ALTER ROLE cdckit_reader PASSWORD :'reader_pw';
SQL
