//! Test fixtures (feature `fixtures`, TEST-ONLY): 2 KiB sectors sealed by
//! filecoin-proofs-api itself, their PoSt and SnapDeals vanilla proofs made as
//! Curio makes them, and test-only parameter files, for this crate's tests and
//! the daemon's. Nothing here is mocked: every commitment and proof comes from
//! filecoin-proofs.
//!
//! filecoin-proofs reads its `FIL_PROOFS_*` settings once per process, so the
//! first call to any function here sets them (parameter and SDR parent cache
//! directories in temporary directories) before filecoin-proofs runs; a test
//! process must not call filecoin-proofs before it.
//!
//! `CUZK_TEST_PARAMS_DIR`, when set, names a directory where the generated
//! parameter files are kept for later test processes (the test script sets
//! it, so one run generates each file once).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::Context;
use filecoin_proofs::{FallbackPoStSectorProof, SectorShape2KiB};
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output, SealPreCommitPhase2Output};
use filecoin_proofs_api::{
    post, update, PieceInfo, PrivateReplicaInfo, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};

use serde::de::DeserializeOwned;
use serde::Serialize;
use storage_proofs_update::PartitionProof;

use crate::params::ParamPaths;
use crate::{generate, CpuFixedBase, Generate, Kind};

/// The seal proof every fixture sector uses.
pub const SEAL: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
/// The PoSt and update proofs of 2 KiB sectors sealed with `SEAL`.
/// The WinningPoSt proof of those sectors.
pub const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
/// The WindowPoSt proof of those sectors.
pub const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
/// The SnapDeals update proof of those sectors.
pub const UPDATE: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
/// The miner whose sectors the fixtures are: Curio sends its actor id.
pub const MINER_ID: u64 = 1000;
/// The prover id of `MINER_ID` as Curio derives it (its ID address
/// payload, the LEB128 of 1000, left aligned in 32 bytes), so that the
/// fixtures' sectors can be proved from Curio's requests.
pub const PROVER_ID: [u8; 32] = {
    let mut id = [0u8; 32];
    (id[0], id[1]) = (0xe8, 0x07);
    id
};
/// The sealing ticket every fixture sector was sealed with.
pub const TICKET: [u8; 32] = [3; 32];
/// The interactive seed of every fixture sector's C1.
pub const SEED: [u8; 32] = [5; 32];

/// Bytes of user data in a 2 KiB sector (the rest is Fr32 padding).
const DATA_BYTES: u64 = 2032;

/// The process's directories, made once with the environment.
struct Dirs {
    /// Parameter files, as FIL_PROOFS_PARAMETER_CACHE.
    params: ParamsDir,
    /// Sectors' files and the SDR parent cache.
    work: tempfile::TempDir,
    /// The kinds whose files are already in `params`; the lock also keeps two
    /// tests from generating the same file at once.
    generated: Mutex<BTreeSet<Kind>>,
}

/// Where the parameter files go: kept for later processes, or temporary.
enum ParamsDir {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

impl ParamsDir {
    fn path(&self) -> &Path {
        match self {
            ParamsDir::Kept(path) => path,
            ParamsDir::Temporary(dir) => dir.path(),
        }
    }
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let params = match std::env::var_os("CUZK_TEST_PARAMS_DIR") {
            Some(dir) => {
                std::fs::create_dir_all(&dir).expect("the CUZK_TEST_PARAMS_DIR directory");
                ParamsDir::Kept(PathBuf::from(dir))
            }
            None => ParamsDir::Temporary(tempfile::tempdir().expect("a temporary parameter directory")),
        };
        let work = tempfile::tempdir().expect("a temporary sector directory");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", params.path());
        std::env::set_var("FIL_PROOFS_CACHE_DIR", work.path().join("parents"));
        // The generated files are not the production ones filecoin-proofs knows.
        std::env::set_var("FIL_PROOFS_VERIFY_PRODUCTION_PARAMS", "0");
        Dirs { params, work, generated: Mutex::new(BTreeSet::new()) }
    })
}

/// The parameter directory filecoin-proofs reads in this process.
pub fn params_dir() -> &'static Path {
    dirs().params.path()
}

/// Writes the 2 KiB parameter files of `kinds` (TEST-ONLY toxic waste) into
/// `params_dir()`, each kind once per process, or once per run where an
/// earlier process left complete files. The PoRep file is 1.1 GB.
pub fn ensure_params(kinds: &[Kind]) -> anyhow::Result<()> {
    let d = dirs();
    let mut generated = d.generated.lock().expect("no test panicked while generating");
    let complete = |kind: Kind| -> anyhow::Result<bool> {
        let paths = ParamPaths::new(d.params.path(), &kind.cache_id(2048)?);
        Ok(matches!(d.params, ParamsDir::Kept(_))
            && [paths.params, paths.vk, paths.meta].iter().all(|p| p.is_file()))
    };
    let mut missing = Vec::new();
    for &kind in kinds {
        if !generated.contains(&kind) && !complete(kind)? {
            missing.push(kind);
        }
    }
    if !missing.is_empty() {
        generate(
            &Generate { force: true, ..Generate::new(2048, &missing, d.params.path()) },
            &CpuFixedBase::default(),
        )?;
        generated.extend(missing);
    }
    Ok(())
}

/// A 2 KiB sector sealed up to commit phase 1.
pub struct Sector {
    /// Its id (the fixture's own numbering).
    pub id: SectorId,
    /// The cache directory (trees, p_aux, t_aux), as PoSt and updates need it.
    pub cache: PathBuf,
    /// The replica file.
    pub sealed: PathBuf,
    /// The one piece filling it.
    pub pieces: Vec<PieceInfo>,
    /// comm_r and comm_d.
    pub p2: SealPreCommitPhase2Output,
    /// The commit-phase-1 output, the PoRep C2 input.
    pub c1: SealCommitPhase1Output,
}

impl Sector {
    /// The replica as filecoin-proofs-api's PoSt functions take it.
    pub fn private_replica(&self, proof: RegisteredPoStProof) -> PrivateReplicaInfo {
        PrivateReplicaInfo::new(proof, self.p2.comm_r, self.cache.clone(), self.sealed.clone())
    }
}

/// Writes `DATA_BYTES` of data derived from `salt` as one piece into a new
/// staged file at `path`.
fn stage_piece(path: &Path, salt: u64) -> anyhow::Result<PieceInfo> {
    let data: Vec<u8> = (0..DATA_BYTES).map(|i| ((i * 31 + salt * 7) % 251) as u8).collect();
    let mut staged = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| path.display().to_string())?;
    let (piece, _) = seal::add_piece(SEAL, &data[..], &mut staged, UnpaddedBytesAmount(DATA_BYTES), &[])?;
    Ok(piece)
}

/// A replica file of `len` zero bytes and a cache directory under `dir`:
/// sealing takes an empty replica, encoding one of the sector's size.
fn replica_and_cache(dir: &Path, len: u64) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (replica, cache) = (dir.join("replica"), dir.join("cache"));
    std::fs::create_dir_all(&cache).with_context(|| cache.display().to_string())?;
    File::create(&replica).and_then(|f| f.set_len(len)).with_context(|| replica.display().to_string())?;
    Ok((replica, cache))
}

/// Seals sector `id` (data derived from the id) through pre-commit 1 and 2
/// and commit phase 1, in a directory of its own.
pub fn seal(id: u64) -> anyhow::Result<Sector> {
    let dir = dirs().work.path().join(format!("sector-{id}"));
    let (sealed, cache) = replica_and_cache(&dir, 0)?;
    let staged = dir.join("staged");
    let piece = stage_piece(&staged, id)?;
    let sector = SectorId::from(id);
    let pieces = vec![piece];
    let p1 =
        seal::seal_pre_commit_phase1(SEAL, &cache, &staged, &sealed, PROVER_ID, sector, TICKET, &pieces)?;
    let p2 = seal::seal_pre_commit_phase2(p1, &cache, &sealed)?;
    let c1 = seal::seal_commit_phase1(&cache, &sealed, PROVER_ID, sector, TICKET, SEED, p2.clone(), &pieces)?;
    Ok(Sector { id: sector, cache, sealed, pieces, p2, c1 })
}

/// The PoSt vanilla proofs of `sectors` under `randomness`, as Curio makes
/// them: `generate_fallback_sector_challenges`, then one
/// `generate_single_vanilla_proof` per sector, in the order given.
pub fn post_vanilla_proofs(
    proof: RegisteredPoStProof,
    randomness: [u8; 32],
    sectors: &[&Sector],
) -> anyhow::Result<Vec<Vec<u8>>> {
    let ids: Vec<SectorId> = sectors.iter().map(|s| s.id).collect();
    let challenges = post::generate_fallback_sector_challenges(proof, &randomness, &ids, PROVER_ID)?;
    sectors
        .iter()
        .map(|s| {
            let mine = challenges.get(&s.id).with_context(|| format!("no challenges for sector {}", s.id))?;
            post::generate_single_vanilla_proof(proof, s.id, &s.private_replica(proof), mine)
        })
        .collect()
}

/// An empty-sector update's public commitments and vanilla proofs.
pub struct Update {
    /// The sector key's comm_r.
    pub comm_r_old: [u8; 32],
    /// The updated replica's comm_r.
    pub comm_r_new: [u8; 32],
    /// The new data's comm_d.
    pub comm_d_new: [u8; 32],
    /// One encoded partition proof per partition (`generate_partition_proofs`).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// Encodes new data into `sector` (`empty_sector_update_encode_into`) and makes
/// the update's vanilla proofs (`generate_partition_proofs`).
pub fn update(sector: &Sector) -> anyhow::Result<Update> {
    let dir = dirs().work.path().join(format!("update-{}", u64::from(sector.id)));
    let (replica, cache) = replica_and_cache(&dir, u64::from(UPDATE.sector_size()))?;
    let staged = dir.join("staged");
    let piece = stage_piece(&staged, u64::from(sector.id) + 1000)?;
    let encoded = update::empty_sector_update_encode_into(
        UPDATE,
        &replica,
        &cache,
        &sector.sealed,
        &sector.cache,
        &staged,
        &[piece],
    )?;
    let proofs = update::generate_partition_proofs(
        UPDATE,
        sector.p2.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sector.sealed,
        &sector.cache,
        &replica,
        &cache,
    )?;
    Ok(Update {
        comm_r_old: sector.p2.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs: proofs.into_iter().map(|p| p.0).collect(),
    })
}

/// A 2 KiB vanilla proof of `kind` (bincode, as `post_vanilla_proofs` and
/// `update` return them) with `edit` applied to its serde form as JSON, so
/// that a test can make one field malformed (an absurd path index, a
/// commitment that is not a field element) and nothing else. PoRep's vanilla
/// proofs travel as JSON already, inside the C1 output, so there is nothing
/// to decode for that kind.
pub fn edit_vanilla(
    kind: Kind,
    bytes: &[u8],
    edit: impl FnOnce(&mut serde_json::Value),
) -> anyhow::Result<Vec<u8>> {
    match kind {
        Kind::WinningPost | Kind::WindowPost => {
            edit_as::<FallbackPoStSectorProof<SectorShape2KiB>>(bytes, edit)
        }
        Kind::EmptySectorUpdate => edit_as::<PartitionProof<SectorShape2KiB>>(bytes, edit),
        Kind::Porep => anyhow::bail!("PoRep vanilla proofs are JSON in the C1 output: edit that"),
    }
}

fn edit_as<T: Serialize + DeserializeOwned>(
    bytes: &[u8],
    edit: impl FnOnce(&mut serde_json::Value),
) -> anyhow::Result<Vec<u8>> {
    let mut value = serde_json::to_value(bincode::deserialize::<T>(bytes)?)?;
    edit(&mut value);
    Ok(bincode::serialize(&serde_json::from_value::<T>(value)?)?)
}
