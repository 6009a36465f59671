-- The demo table cdckit syncs (compose/config/cdckit.yaml `tables`), the same as scripts/quickstart's.
-- Postgres runs the files in /docker-entrypoint-initdb.d once, when the pgdata volume is created;
-- with a database of your own, drop this folder's mount and list your tables in cdckit.yaml.
CREATE TABLE IF NOT EXISTS public.customers (
    id serial PRIMARY KEY,
    name text,
    email text,
    updated_at timestamptz DEFAULT now()
);

INSERT INTO public.customers (name, email)
SELECT 'customer ' || g, 'c' || g || '@example.com'
FROM generate_series(1, 20000) AS g
WHERE NOT EXISTS (SELECT 1 FROM public.customers);
