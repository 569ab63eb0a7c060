-- The job store on PostgreSQL (src/store/pg.rs), first version. Applied once
-- per database by src/store/migrate.rs, inside its transaction, and recorded
-- in cuzk_schema_migrations. Tables are prefixed so that the store can share
-- a database (and a schema) with other software, Curio's included.

-- One row per job. `record` is the JobRecord as the daemon wrote it (JSON:
-- whatever fields a job has, tenants included, without a migration each);
-- the columns beside it are what the database itself sorts and filters on.
CREATE TABLE cuzk_jobs (
    id text PRIMARY KEY,
    -- Submission order: a restart restores jobs in this order.
    seq bigint NOT NULL,
    -- `json`, not `jsonb`: stored as written, so any string the daemon can
    -- serialize (a \u0000 escape included) is accepted.
    record json NOT NULL,
    -- How the job ended (stage, error, time); NULL while it runs.
    outcome json
);
CREATE INDEX cuzk_jobs_seq ON cuzk_jobs (seq);

-- One row per partition that has a result: its proof, or why it failed
-- (both can be recorded; the daemon decides what they mean). Removing a job
-- removes its partitions.
CREATE TABLE cuzk_partitions (
    job text NOT NULL REFERENCES cuzk_jobs (id) ON DELETE CASCADE,
    partition_index bigint NOT NULL CHECK (partition_index >= 0),
    proof bytea,
    public_inputs bytea[],
    failure text,
    PRIMARY KEY (job, partition_index)
);

-- A failing store's probe (src/store.rs, Engine::commit): one row that each
-- retry overwrites with 64 KiB, so that a retry succeeds only when the
-- database can take new data. EXTERNAL storage: out of line and never
-- compressed, so the zeros written take their full size.
CREATE TABLE cuzk_probe (
    id integer PRIMARY KEY CHECK (id = 1),
    bytes bytea NOT NULL
);
ALTER TABLE cuzk_probe ALTER COLUMN bytes SET STORAGE EXTERNAL;
