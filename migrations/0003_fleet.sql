-- A fleet of daemons on one database (issue 14; docs/operations.md "Fleet").
-- Submissions from any node go straight to these tables; partitions are
-- claimed from cuzk_leases; a job ends here, in the transaction that records
-- its last partition.

-- Whose job it is and its idempotency key, as columns: a key is unique per
-- tenant across the fleet, so two nodes given the same key at once create
-- one job. Rows written before this migration get theirs from the record.
ALTER TABLE cuzk_jobs ADD COLUMN tenant text;
ALTER TABLE cuzk_jobs ADD COLUMN idempotency_key text;
UPDATE cuzk_jobs SET tenant = coalesce(record->>'tenant', 'default'),
                     idempotency_key = record->>'idempotency_key';
CREATE UNIQUE INDEX cuzk_jobs_idempotency ON cuzk_jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Queue limits count the unfinished jobs, fleet-wide and per tenant.
CREATE INDEX cuzk_jobs_unfinished ON cuzk_jobs (tenant) WHERE outcome IS NULL;

-- Submission order across the fleet (a node's own counter would interleave
-- with the others').
CREATE SEQUENCE cuzk_job_seq;
SELECT setval('cuzk_job_seq', coalesce((SELECT max(seq) FROM cuzk_jobs), 0) + 1, false);

-- Which circuit a partition needs, so that a node lacking its parameter
-- file passes it by; and where the owner last said the partition was
-- (reported with each renewal), for status read on another node.
ALTER TABLE cuzk_leases ADD COLUMN circuit_id text NOT NULL DEFAULT '';
ALTER TABLE cuzk_leases ADD COLUMN stage text;

-- The node that proved a partition (or failed it), and what it saw of it
-- (timings, worker, GPU phases: a PartitionView), shown by every node.
ALTER TABLE cuzk_partitions ADD COLUMN node text;
ALTER TABLE cuzk_partitions ADD COLUMN detail json;
