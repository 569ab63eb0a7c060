-- Partitions as leased work (src/store/leases.rs, issue 14 item 2): the
-- queue several daemons share. One row per partition not yet finished: no
-- owner while it waits; a node's name and a lease end while a node holds
-- it. A lease that has run out is claimable again. Removing a job removes
-- its rows.
CREATE TABLE cuzk_leases (
    job text NOT NULL REFERENCES cuzk_jobs (id) ON DELETE CASCADE,
    partition_index bigint NOT NULL CHECK (partition_index >= 0),
    -- Claimed highest first (0 low .. 3 critical), then oldest job first.
    priority smallint NOT NULL,
    seq bigint NOT NULL,
    owner text,
    lease_until timestamptz,
    -- Claims so far: an expired lease counts as an attempt used.
    attempts integer NOT NULL DEFAULT 0,
    PRIMARY KEY (job, partition_index)
);
-- The claim walks this order and stops after the rows it takes.
CREATE INDEX cuzk_leases_order ON cuzk_leases (priority DESC, seq, partition_index);
