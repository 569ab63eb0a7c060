-- Proving keys of the built-in families' shapes, shared by a fleet of
-- daemons (src/store/keys_pg.rs, issue 14 item 4): a job's partitions may be
-- proved on different nodes, so every node must prove with the same key and
-- serve the same verifying key. The first node to need a shape sets it up
-- (or brings the key it already had) and publishes it here; the others copy
-- it to their key directory. A key is written once and never changed.

-- One row per shape whose key is published. The proving key itself is in
-- cuzk_key_chunks: at 640 bytes per constraint it outgrows what one value
-- should hold (bytea stops at 1 GB, and a client holds a whole value in
-- memory).
CREATE TABLE cuzk_keys (
    circuit_id text PRIMARY KEY,
    -- The verifying key, compressed: a few hundred bytes.
    vk bytea NOT NULL,
    -- The proving key file's length and SHA-256 (arkworks' uncompressed
    -- form, as in <data_dir>/keys/<circuit_id>.pk): a node compares its own
    -- file with them, and checks what it downloaded.
    pk_bytes bigint NOT NULL CHECK (pk_bytes >= 0),
    pk_sha256 bytea NOT NULL CHECK (length(pk_sha256) = 32),
    chunks integer NOT NULL CHECK (chunks >= 0),
    -- For the operator: when it was published.
    published_at timestamptz NOT NULL DEFAULT now()
);

-- The proving key in order, chunk n holding bytes [n * 16 MiB, ...): read
-- one chunk at a time, so that neither side holds the key twice. Written in
-- the transaction that writes its cuzk_keys row, so a reader sees all of
-- them or none.
CREATE TABLE cuzk_key_chunks (
    circuit_id text NOT NULL REFERENCES cuzk_keys (circuit_id) ON DELETE CASCADE,
    n integer NOT NULL CHECK (n >= 0),
    bytes bytea NOT NULL,
    PRIMARY KEY (circuit_id, n)
);
-- Curve points do not compress: stored out of line without trying.
ALTER TABLE cuzk_key_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;
