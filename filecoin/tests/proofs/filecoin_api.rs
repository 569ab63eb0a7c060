//! Parameters from `generate` against filecoin-proofs-api itself: a 2 KiB sector
//! sealed by filecoin-proofs, WinningPoSt and WindowPoSt proved by its bellperson
//! prover from our files and accepted by its verifiers; and the recording
//! constraint system over the real PoRep circuit built from a C1 output.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use cuzk_filecoin::convert::fr_from_blstrs;
use cuzk_filecoin::fixtures::{self, Sector, PROVER_ID, SEAL, SEED, TICKET, WINDOW, WINNING};
use cuzk_filecoin::params::ParamPaths;
use cuzk_filecoin::porep::PorepRequest;
use cuzk_filecoin::record::{Evaluation, Recorded};
use cuzk_filecoin::{generate, CpuFixedBase, Error, Generate, Kind, ProofRequest};
use filecoin_proofs_api::seal;
use filecoin_proofs_api::{post, PublicReplicaInfo, RegisteredPoStProof, SectorId};

const RANDOMNESS: [u8; 32] = [44; 32];

/// One sealed sector, with the WinningPoSt and WindowPoSt parameters
/// generated, shared by every test (`fixtures` sets filecoin-proofs'
/// environment before its first call).
fn fixture() -> &'static Sector {
    static SECTOR: OnceLock<Sector> = OnceLock::new();
    SECTOR.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        fixtures::ensure_params(&[Kind::WinningPost, Kind::WindowPost]).unwrap();
        fixtures::seal(17).unwrap()
    })
}

fn public_replicas(
    f: &Sector,
    proof: RegisteredPoStProof,
    comm_r: [u8; 32],
) -> BTreeMap<SectorId, PublicReplicaInfo> {
    BTreeMap::from([(f.id, PublicReplicaInfo::new(proof, comm_r))])
}

#[test]
fn generated_files_carry_filecoin_proofs_names() {
    fixture();
    for kind in [Kind::WinningPost, Kind::WindowPost] {
        let paths = ParamPaths::new(fixtures::params_dir(), &kind.cache_id(2048).unwrap());
        for path in [&paths.params, &paths.vk, &paths.meta] {
            assert!(path.exists(), "{} missing", path.display());
        }
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&paths.meta).unwrap()).unwrap();
        assert_eq!(meta, serde_json::json!({ "sector_size": 2048 }));
    }
    assert_eq!(
        WINDOW.cache_params_path().unwrap().file_name(),
        ParamPaths::new(fixtures::params_dir(), &Kind::WindowPost.cache_id(2048).unwrap()).params.file_name()
    );
}

#[test]
fn winning_post_proves_and_verifies_with_generated_parameters() {
    let f = fixture();
    let proofs = post::generate_winning_post(
        &RANDOMNESS,
        &BTreeMap::from([(f.id, f.private_replica(WINNING))]),
        PROVER_ID,
    )
    .unwrap();
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
    let proofs = post::generate_window_post(
        &RANDOMNESS,
        &BTreeMap::from([(f.id, f.private_replica(WINDOW))]),
        PROVER_ID,
    )
    .unwrap();
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
    let request = porep_request(f);
    assert_eq!(request.partition_count().unwrap(), 1);
    let Ok(Recorded::Witness(witness)) = request.record_partition(0, Evaluation::Direct) else {
        panic!("direct evaluation records a witness");
    };
    assert_eq!(witness.unsatisfied(), 0);
    let (comm_r, comm_d) = (f.p2.comm_r, f.p2.comm_d);
    let expected = seal::get_seal_inputs(SEAL, comm_r, comm_d, PROVER_ID, f.id, TICKET, SEED).unwrap();
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

    // The compiled evaluation: the blank circuit's matrices times the
    // assignment alone give the same a, b and c.
    let Ok(Recorded::Assignment { values, .. }) = request.record_partition(0, Evaluation::Compiled) else {
        panic!("compiled evaluation records an assignment");
    };
    let [a, b, c] = blank.shape.matrices.evaluate(&values, witness.a.len()).unwrap();
    assert!(a == witness.a && b == witness.b && c == witness.c, "compiled a, b, c differ");

    // A wrong evaluation shows as exactly one unsatisfied constraint.
    let mut broken = witness;
    broken.c[5] += ark_bls12_381::Fr::from(1u64);
    assert_eq!(broken.unsatisfied(), 1);
}

/// The fixture's C1 output as `seal_commit_phase2`'s arguments.
fn porep_request(f: &Sector) -> PorepRequest {
    PorepRequest { c1: f.c1.clone(), prover_id: PROVER_ID, sector_id: u64::from(f.id) }
}

#[test]
fn porep_check_accepts_the_c1_output_and_refuses_a_tampered_one() {
    let f = fixture();
    porep_request(f).check().unwrap();
    let refused = |c1: seal::SealCommitPhase1Output| {
        PorepRequest { c1, ..porep_request(f) }.check().unwrap_err().to_string()
    };

    let mut other_seed = f.c1.clone();
    other_seed.seed[0] ^= 1;
    assert!(refused(other_seed).contains("vanilla proofs do not verify"));
    let mut other_comm_r = f.c1.clone();
    other_comm_r.comm_r[2] ^= 1;
    assert!(refused(other_comm_r).contains("vanilla proofs do not verify"));
    let mut zero = f.c1.clone();
    zero.comm_d = [0; 32];
    assert!(refused(zero).contains("comm_d is all zero"));
    let mut wrong_kind = f.c1.clone();
    wrong_kind.registered_proof = filecoin_proofs_api::RegisteredSealProof::StackedDrg32GiBV1_1;
    assert!(refused(wrong_kind).contains("not StackedDrg32GiBV1_1 proofs"));

    // Sealed for another prover or sector: its proof would never verify
    // for these, so the replica id refuses it.
    for other in [
        PorepRequest { prover_id: [8; 32], ..porep_request(f) },
        PorepRequest { sector_id: u64::from(f.id) + 1, ..porep_request(f) },
    ] {
        let err = other.check().unwrap_err().to_string();
        assert!(err.contains("its replica id differs"), "{err}");
    }
}

#[test]
fn porep_parameters_above_the_limit_need_force() {
    let dir = tempfile::tempdir().unwrap();
    match generate(&Generate::new(2048, &[Kind::Porep], dir.path()), &CpuFixedBase::default()) {
        Err(Error::TooLarge { bytes, limit, .. }) => assert!(bytes > limit),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
#[ignore = "writes the 1.1 GB PoRep file and runs bellperson's commit phase 2; minutes on 2 cores (docs/filecoin.md)"]
fn porep_seal_verifies_with_generated_parameters() {
    let f = fixture();
    fixtures::ensure_params(&[Kind::Porep]).unwrap();
    let proof = seal::seal_commit_phase2(f.c1.clone(), PROVER_ID, f.id).unwrap();
    let (comm_r, comm_d) = (f.p2.comm_r, f.p2.comm_d);
    let verify = |seed: [u8; 32]| {
        seal::verify_seal(SEAL, comm_r, comm_d, PROVER_ID, f.id, TICKET, seed, &proof.proof).unwrap_or(false)
    };
    assert!(verify(SEED));
    let mut other = SEED;
    other[0] ^= 1;
    assert!(!verify(other));
}
