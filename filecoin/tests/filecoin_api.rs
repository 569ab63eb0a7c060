//! Parameters from `generate` against filecoin-proofs-api itself: a 2 KiB sector
//! sealed by filecoin-proofs, WinningPoSt and WindowPoSt proved by its bellperson
//! prover from our files and accepted by its verifiers; and the recording
//! constraint system over the real PoRep circuit built from a C1 output.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::OnceLock;

use cuzk_filecoin::convert::fr_from_blstrs;
use cuzk_filecoin::params::ParamPaths;
use cuzk_filecoin::{generate, porep, Error, Kind};
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output, SealPreCommitPhase2Output};
use filecoin_proofs_api::{
    post, PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof, RegisteredSealProof,
    SectorId, UnpaddedBytesAmount,
};

const SEAL: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const PROVER_ID: [u8; 32] = [9; 32];
const TICKET: [u8; 32] = [3; 32];
const SEED: [u8; 32] = [5; 32];
const RANDOMNESS: [u8; 32] = [44; 32];

/// One sealed sector and the parameter directory, shared by every test: the
/// environment filecoin-proofs reads once per process is set before its first
/// call.
struct Fixture {
    /// The generated parameters, as FIL_PROOFS_PARAMETER_CACHE.
    params_dir: tempfile::TempDir,
    /// The sector's files (staged, sealed, cache) and the SDR parent cache.
    _sector_dir: tempfile::TempDir,
    /// The sealed sector's id, its cache directory and replica file.
    sector: SectorId,
    cache: PathBuf,
    sealed: PathBuf,
    /// comm_r and comm_d, for the verifiers.
    p2: SealPreCommitPhase2Output,
    /// The commit-phase-1 output, the PoRep C2 input.
    c1: SealCommitPhase1Output,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        let params_dir = tempfile::tempdir().unwrap();
        let sector_dir = tempfile::tempdir().unwrap();
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", params_dir.path());
        std::env::set_var("FIL_PROOFS_CACHE_DIR", sector_dir.path().join("parents"));
        std::env::set_var("FIL_PROOFS_VERIFY_PRODUCTION_PARAMS", "0");
        generate(
            2048,
            &[Kind::WinningPost, Kind::WindowPost],
            params_dir.path(),
            false,
        )
        .unwrap();

        let staged = sector_dir.path().join("staged");
        let sealed = sector_dir.path().join("sealed");
        let cache = sector_dir.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        File::create(&sealed).unwrap();
        let data: Vec<u8> = (0..2032u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut staged_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&staged)
            .unwrap();
        let (piece, _) = seal::add_piece(
            SEAL,
            &data[..],
            &mut staged_file,
            UnpaddedBytesAmount(2032),
            &[],
        )
        .unwrap();
        let sector = SectorId::from(17);
        let p1 = seal::seal_pre_commit_phase1(
            SEAL,
            &cache,
            &staged,
            &sealed,
            PROVER_ID,
            sector,
            TICKET,
            &[piece.clone()],
        )
        .unwrap();
        let p2 = seal::seal_pre_commit_phase2(p1, &cache, &sealed).unwrap();
        let c1 = seal::seal_commit_phase1(
            &cache,
            &sealed,
            PROVER_ID,
            sector,
            TICKET,
            SEED,
            p2.clone(),
            &[piece],
        )
        .unwrap();
        Fixture {
            params_dir,
            _sector_dir: sector_dir,
            sector,
            cache,
            sealed,
            p2,
            c1,
        }
    })
}

fn private_replicas(
    f: &Fixture,
    proof: RegisteredPoStProof,
) -> BTreeMap<SectorId, PrivateReplicaInfo> {
    let info = PrivateReplicaInfo::new(proof, f.p2.comm_r, f.cache.clone(), f.sealed.clone());
    BTreeMap::from([(f.sector, info)])
}

fn public_replicas(
    f: &Fixture,
    proof: RegisteredPoStProof,
    comm_r: [u8; 32],
) -> BTreeMap<SectorId, PublicReplicaInfo> {
    BTreeMap::from([(f.sector, PublicReplicaInfo::new(proof, comm_r))])
}

#[test]
fn generated_files_carry_filecoin_proofs_names() {
    let f = fixture();
    for kind in [Kind::WinningPost, Kind::WindowPost] {
        let paths = ParamPaths::new(f.params_dir.path(), &kind.cache_id(2048).unwrap());
        for path in [&paths.params, &paths.vk, &paths.meta] {
            assert!(path.exists(), "{} missing", path.display());
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&paths.meta).unwrap()).unwrap();
        assert_eq!(meta, serde_json::json!({ "sector_size": 2048 }));
    }
    assert_eq!(
        WINDOW.cache_params_path().unwrap().file_name(),
        ParamPaths::new(
            f.params_dir.path(),
            &Kind::WindowPost.cache_id(2048).unwrap()
        )
        .params
        .file_name()
    );
}

#[test]
fn winning_post_proves_and_verifies_with_generated_parameters() {
    let f = fixture();
    let proofs =
        post::generate_winning_post(&RANDOMNESS, &private_replicas(f, WINNING), PROVER_ID).unwrap();
    assert_eq!(proofs.len(), 1);
    let proof = &proofs[0].1;
    let public = public_replicas(f, WINNING, f.p2.comm_r);
    assert!(post::verify_winning_post(&RANDOMNESS, proof, &public, PROVER_ID).unwrap());
    let mut other = RANDOMNESS;
    other[0] ^= 1;
    assert!(!post::verify_winning_post(&other, proof, &public, PROVER_ID).unwrap_or(false));
}

#[test]
fn window_post_proves_and_verifies_with_generated_parameters() {
    let f = fixture();
    let proofs =
        post::generate_window_post(&RANDOMNESS, &private_replicas(f, WINDOW), PROVER_ID).unwrap();
    let proofs: Vec<(RegisteredPoStProof, &[u8])> =
        proofs.iter().map(|(p, bytes)| (*p, &bytes[..])).collect();
    let public = public_replicas(f, WINDOW, f.p2.comm_r);
    assert!(post::verify_window_post(&RANDOMNESS, &proofs, &public, PROVER_ID).unwrap());
    let mut comm_r = f.p2.comm_r;
    comm_r[1] ^= 1;
    let tampered = public_replicas(f, WINDOW, comm_r);
    assert!(!post::verify_window_post(&RANDOMNESS, &proofs, &tampered, PROVER_ID).unwrap_or(false));
}

#[test]
fn recorded_porep_partition_is_satisfied_with_filecoin_public_inputs() {
    let f = fixture();
    assert_eq!(porep::partition_count(&f.c1), 1);
    let witness = porep::record_partition(&f.c1, 0).unwrap();
    assert_eq!(witness.unsatisfied(), 0);
    let (comm_r, comm_d) = (f.p2.comm_r, f.p2.comm_d);
    let expected =
        seal::get_seal_inputs(SEAL, comm_r, comm_d, PROVER_ID, f.sector, TICKET, SEED).unwrap();
    let expected: Vec<_> = expected[0].iter().map(fr_from_blstrs).collect();
    assert_eq!(witness.public_inputs(), &expected[..]);
    // The input constraints close the evaluations: A = x_i, B = C = 0.
    let n = witness.a.len() - witness.inputs.len();
    assert_eq!(&witness.a[n..], &witness.inputs[..]);

    // The witness's densities are the blank circuit's, as the setup assumed.
    let blank = Kind::Porep.blank(2048).unwrap();
    assert_eq!(witness.densities, blank.shape.densities);
    assert_eq!(witness.a.len(), blank.shape.num_constraints());
    assert_eq!(witness.aux.len(), blank.shape.num_aux());

    // A wrong evaluation shows as exactly one unsatisfied constraint.
    let mut broken = witness;
    broken.c[5] += ark_bls12_381::Fr::from(1u64);
    assert_eq!(broken.unsatisfied(), 1);
}

#[test]
fn porep_parameters_above_the_limit_need_force() {
    let dir = tempfile::tempdir().unwrap();
    match generate(2048, &[Kind::Porep], dir.path(), false) {
        Err(Error::TooLarge { bytes, limit, .. }) => assert!(bytes > limit),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
#[ignore = "writes the 1.1 GB PoRep file and runs bellperson's commit phase 2; minutes on 2 cores (docs/filecoin.md)"]
fn porep_seal_verifies_with_generated_parameters() {
    let f = fixture();
    generate(2048, &[Kind::Porep], f.params_dir.path(), true).unwrap();
    let proof = seal::seal_commit_phase2(f.c1.clone(), PROVER_ID, f.sector).unwrap();
    let (comm_r, comm_d) = (f.p2.comm_r, f.p2.comm_d);
    let verify = |seed: [u8; 32]| {
        seal::verify_seal(
            SEAL,
            comm_r,
            comm_d,
            PROVER_ID,
            f.sector,
            TICKET,
            seed,
            &proof.proof,
        )
        .unwrap_or(false)
    };
    assert!(verify(SEED));
    let mut other = SEED;
    other[0] ^= 1;
    assert!(!verify(other));
}
