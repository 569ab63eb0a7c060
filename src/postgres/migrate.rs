//! The PostgreSQL schema: the SQL files under `migrations/`, applied in
//! order when a daemon connects, each once per database. Everything runs in
//! one transaction holding an advisory lock, so two daemons starting at
//! once against an empty database do not both create the tables (the
//! second waits, then finds them made); a migration that fails leaves
//! nothing half applied.

use postgres::Client;

use super::{PgError, PgFailure, Place};

/// Every migration, in order: (version, name, SQL). A released migration is
/// never edited; a change to the schema is a new file.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "jobs", include_str!("../../migrations/0001_jobs.sql")),
    (2, "leases", include_str!("../../migrations/0002_leases.sql")),
    (3, "fleet", include_str!("../../migrations/0003_fleet.sql")),
    (4, "keys", include_str!("../../migrations/0004_keys.sql")),
];

/// The advisory lock key ("cuzk" and "mig" in ASCII): one per database, so
/// migrations of different schemas in one database wait for each other too,
/// which costs nothing that matters.
const LOCK_KEY: i64 = 0x6375_7a6b_006d_6967;

/// Brings the schema `client` (`place`'s connection) writes to up to date.
/// Refuses a database that a newer cuzk migrated further than this one
/// knows: its tables may not mean what this version would write.
pub fn migrate(client: &mut Client, place: &Place) -> Result<(), PgError> {
    let failed = |e| place.failed("cannot prepare the job store's tables", e);
    let mut txn = client.transaction().map_err(failed)?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).map_err(failed)?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS cuzk_schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .map_err(failed)?;
    let newest: i32 = txn
        .query_one("SELECT coalesce(max(version), 0) FROM cuzk_schema_migrations", &[])
        .map_err(failed)?
        .get(0);
    let known = MIGRATIONS.last().map_or(0, |(version, _, _)| *version);
    if newest > known {
        return Err(place.error(PgFailure::NewerSchema { found: newest, known }));
    }
    for &(version, name, sql) in MIGRATIONS.iter().filter(|(version, _, _)| *version > newest) {
        txn.batch_execute(sql).map_err(|error| place.error(PgFailure::Migration { version, name, error }))?;
        txn.execute("INSERT INTO cuzk_schema_migrations (version, name) VALUES ($1, $2)", &[&version, &name])
            .map_err(failed)?;
        log::info!("{place}: schema migrated to version {version} ({name})");
    }
    txn.commit().map_err(failed)
}
