-- Least-privilege roles for cdckit, and the database objects cdckit would otherwise create itself.
--
-- Run once (and again after changing the tables) as a superuser (PostgreSQL 15 lets only a
-- superuser give the REPLICATION attribute; on a managed service, its admin role), connected to
-- the captured database. Idempotent. Render it for a config with
--   cdckit config roles-sql --cdc-role cdckit_cdc --reader-role cdckit_reader | psql -d <db> -v ON_ERROR_STOP=1
-- or give every variable below with psql -v name=value. Passwords are not set here: afterwards
-- run `\password cdckit_cdc` (and the reader's) in psql, so no password is in a file or a history.
--
-- Why the objects are created here: in PostgreSQL 15 adding a table to a publication needs
-- ownership of the table, and creating the support tables needs CREATE on their schema. Rather
-- than make the replication role own the application's tables, the DBA (as whoever runs this)
-- creates the publication listing exactly the tables, the support tables and the truncate
-- triggers; cdckit and Debezium then find them as wanted and change nothing (Debezium's filtered
-- publication mode alters a publication only when its tables differ). The roles get:
--   cdc_role      LOGIN REPLICATION; SELECT on the captured tables; SELECT, INSERT, UPDATE on the
--                 heartbeat table (Debezium's heartbeat query); SELECT, INSERT on the signal table
--                 (`cdckit snapshot`, and Debezium's incremental-snapshot windows); SELECT on the
--                 truncate marker table. Used by Debezium (connector) and by cdckit run/bootstrap.
--   reader_role   LOGIN; SELECT on the captured tables. Enough for `cdckit verify` and `status`
--                 (pg_replication_slots and pg_current_wal_lsn() need no grant).
-- The truncate trigger writes the marker as the role that truncates: the owners of the captured
-- tables get INSERT, UPDATE on the marker table; grant the same to any other role allowed to
-- TRUNCATE them. `cdckit config check --connect` reports whatever is still missing.
--
-- Variables (all required): cdc_role, reader_role, tables (comma-separated schema.table),
-- heartbeat_table, signal_table, truncate_table, truncate_trigger, publication.

SELECT set_config('cdckit.cdc_role', :'cdc_role', false),
       set_config('cdckit.reader_role', :'reader_role', false),
       set_config('cdckit.tables', :'tables', false),
       set_config('cdckit.heartbeat_table', :'heartbeat_table', false),
       set_config('cdckit.signal_table', :'signal_table', false),
       set_config('cdckit.truncate_table', :'truncate_table', false),
       set_config('cdckit.truncate_trigger', :'truncate_trigger', false),
       set_config('cdckit.publication', :'publication', false);

-- The same DDL as connectors/postgres.py (a unit test keeps them equal).
DO $$
BEGIN
  EXECUTE format('CREATE TABLE IF NOT EXISTS %s (id int PRIMARY KEY, ts timestamptz NOT NULL)',
                 current_setting('cdckit.heartbeat_table'));
  EXECUTE format('CREATE TABLE IF NOT EXISTS %s (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))',
                 current_setting('cdckit.signal_table'));
  EXECUTE format('CREATE TABLE IF NOT EXISTS %s (table_name text PRIMARY KEY, truncated_at timestamptz NOT NULL)',
                 current_setting('cdckit.truncate_table'));
END $$;

CREATE OR REPLACE FUNCTION public.cdckit_record_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('INSERT INTO %s (table_name, truncated_at) VALUES ($1, clock_timestamp()) '
                 'ON CONFLICT (table_name) DO UPDATE SET truncated_at = EXCLUDED.truncated_at', TG_ARGV[0])
    USING TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME;
  RETURN NULL;
END $$;

DO $$
DECLARE
  cdc text := current_setting('cdckit.cdc_role');
  reader text := current_setting('cdckit.reader_role');
  captured regclass[];
  hb regclass := current_setting('cdckit.heartbeat_table')::regclass;
  sig regclass := current_setting('cdckit.signal_table')::regclass;
  marks regclass := current_setting('cdckit.truncate_table')::regclass;
  pub text := current_setting('cdckit.publication');
  wanted regclass[];
  t regclass;
  owner text;
BEGIN
  -- A missing table fails here (regclass), naming it: create it before running this.
  SELECT array_agg(btrim(name)::regclass ORDER BY btrim(name))
    INTO captured FROM unnest(string_to_array(current_setting('cdckit.tables'), ',')) AS name;
  wanted := captured || ARRAY[sig, hb, marks];

  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = cdc) THEN
    EXECUTE format('CREATE ROLE %I LOGIN REPLICATION', cdc);
  ELSE
    EXECUTE format('ALTER ROLE %I LOGIN REPLICATION', cdc);
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = reader) THEN
    EXECUTE format('CREATE ROLE %I LOGIN', reader);
  END IF;
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), cdc, reader);

  FOREACH t IN ARRAY wanted LOOP
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I',
                   (SELECT nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t),
                   cdc, reader);
  END LOOP;
  FOREACH t IN ARRAY captured LOOP
    EXECUTE format('GRANT SELECT ON TABLE %s TO %I, %I', t, cdc, reader);
    EXECUTE format('CREATE OR REPLACE TRIGGER %I AFTER TRUNCATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION public.cdckit_record_truncate(%L)',
                   current_setting('cdckit.truncate_trigger'), t, current_setting('cdckit.truncate_table'));
    SELECT pg_get_userbyid(relowner) INTO owner FROM pg_class WHERE oid = t;
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON TABLE %s TO %I', marks, owner);
  END LOOP;
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON TABLE %s TO %I', hb, cdc);
  EXECUTE format('GRANT SELECT, INSERT ON TABLE %s TO %I', sig, cdc);
  EXECUTE format('GRANT SELECT ON TABLE %s TO %I', marks, cdc);

  -- Exactly these tables, so neither cdckit nor Debezium needs to alter it.
  IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = pub) THEN
    EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s', pub, array_to_string(wanted, ', '));
  ELSIF (SELECT array_agg(p.oid ORDER BY p.oid) FROM (SELECT format('%I.%I', schemaname, tablename)::regclass::oid
           FROM pg_publication_tables WHERE pubname = pub) AS p(oid))
        IS DISTINCT FROM (SELECT array_agg(w::oid ORDER BY w::oid) FROM unnest(wanted) AS w) THEN
    EXECUTE format('ALTER PUBLICATION %I SET TABLE %s', pub, array_to_string(wanted, ', '));
  END IF;
END $$;
