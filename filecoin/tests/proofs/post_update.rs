//! WinningPoSt, WindowPoSt and SnapDeals partitions recorded from vanilla
//! proofs that filecoin-proofs-api made for 2 KiB sectors it sealed: every
//! constraint holds, the public inputs are the ones filecoin-proofs' verifiers
//! compute, the densities are the blank circuit's (which the parameter files
//! assume); and bad requests are refused with a message naming the problem.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use ark_bls12_381::Fr;
use cuzk_filecoin::convert::fr_from_blstrs;
use cuzk_filecoin::fixtures::{self, Sector, PROVER_ID, UPDATE, WINDOW, WINNING};
use cuzk_filecoin::post::PostRequest;
use cuzk_filecoin::record::{Evaluation, Recorded, Shape, Witness};
use cuzk_filecoin::update::UpdateRequest;
use cuzk_filecoin::{Error, Kind, ProofRequest};
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::{as_safe_commitment, PoStType, SectorShape2KiB, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredPoStProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCompound, PublicSector};
use storage_proofs_update::constants::TreeRDomain;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCompound};

type Tree = SectorShape2KiB;

const RANDOMNESS: [u8; 32] = [44; 32];

/// Three sealed sectors (ids 1, 2, 3): 2 KiB WindowPoSt partitions hold 2
/// sectors, so three make two partitions, the second one padded.
fn sectors() -> &'static [Sector] {
    static SECTORS: OnceLock<Vec<Sector>> = OnceLock::new();
    SECTORS.get_or_init(|| (1..=3).map(|id| fixtures::seal(id).unwrap()).collect())
}

/// The blank circuit's shape, recorded once per kind.
fn blank_shape(kind: Kind) -> Arc<Shape> {
    static BLANKS: Mutex<BTreeMap<Kind, Arc<Shape>>> = Mutex::new(BTreeMap::new());
    let mut blanks = BLANKS.lock().unwrap();
    blanks.entry(kind).or_insert_with(|| Arc::new(kind.blank(2048).unwrap().shape)).clone()
}

/// A partition recorded both ways: the direct witness, once the blank
/// circuit's compiled matrices times the compiled recording's assignment
/// gave exactly its a, b and c.
fn record_both(record: impl Fn(Evaluation) -> Result<Recorded, Error>, kind: Kind) -> Witness {
    let Ok(Recorded::Witness(witness)) = record(Evaluation::Direct) else {
        panic!("direct evaluation records a witness");
    };
    let Ok(Recorded::Assignment { values, num_inputs }) = record(Evaluation::Compiled) else {
        panic!("compiled evaluation records an assignment");
    };
    assert_eq!(num_inputs, witness.inputs.len());
    assert_eq!(values, [&witness.inputs[..], &witness.aux[..]].concat());
    let [a, b, c] = blank_shape(kind).matrices.evaluate(&values, witness.a.len()).unwrap();
    assert!(a == witness.a && b == witness.b && c == witness.c, "compiled a, b, c differ");
    witness
}

fn request(
    proof: RegisteredPoStProof,
    vanilla_proofs: Vec<Vec<u8>>,
    partition_index: Option<usize>,
) -> PostRequest {
    PostRequest {
        registered_proof: proof,
        randomness: RANDOMNESS,
        prover_id: PROVER_ID,
        vanilla_proofs,
        partition_index,
    }
}

/// The public inputs of partition `k` as `verify_winning_post` /
/// `verify_window_post` compute them for `sectors` (the verifier lists the
/// WinningPoSt sector once per challenge).
fn verifier_post_inputs(proof: RegisteredPoStProof, sectors: &[&Sector], k: usize) -> Vec<Fr> {
    let config = proof.as_v1_config();
    let winning = config.typ == PoStType::Winning;
    let setup =
        if winning { winning_post_setup_params(&config).unwrap() } else { window_post_setup_params(&config) };
    let params = FallbackPoSt::<Tree>::setup(&setup).unwrap();
    let copies = if winning { params.sector_count } else { 1 };
    let public = fallback::PublicInputs {
        randomness: as_safe_commitment(&RANDOMNESS, "randomness").unwrap(),
        prover_id: as_safe_commitment(&PROVER_ID, "prover_id").unwrap(),
        sectors: (0..copies)
            .flat_map(|_| sectors.iter())
            .map(|s| PublicSector { id: s.id, comm_r: as_safe_commitment(&s.p2.comm_r, "comm_r").unwrap() })
            .collect(),
        k: None,
    };
    FallbackPoStCompound::<Tree>::generate_public_inputs(&public, &params, Some(k))
        .unwrap()
        .iter()
        .map(fr_from_blstrs)
        .collect()
}

/// The error text of a refused request (`Witness` has no `Debug` for
/// `unwrap_err`).
fn refusal<T>(result: Result<T, Error>) -> String {
    result.err().expect("the request is refused").to_string()
}

/// Every constraint holds, the inputs are the verifier's, the densities the
/// blank circuit's.
fn assert_sound(witness: &Witness, expected_inputs: &[Fr], kind: Kind) {
    assert_eq!(witness.unsatisfied(), 0);
    assert_eq!(witness.public_inputs(), expected_inputs);
    assert_eq!(witness.densities, blank_shape(kind).densities);
}

/// A whole request over `sectors`, as the API's `*_with_vanilla` takes it:
/// accepted by `check`, with `partitions` partitions, each recorded sound.
/// Returns the request, its vanilla proofs and the partitions' witnesses.
fn whole_request(
    proof: RegisteredPoStProof,
    sectors: &[&Sector],
    partitions: usize,
) -> (PostRequest, Vec<Vec<u8>>, Vec<Witness>) {
    let vanilla = fixtures::post_vanilla_proofs(proof, RANDOMNESS, sectors).unwrap();
    let req = request(proof, vanilla.clone(), None);
    let (kind, sector_size) = req.kind_and_sector_size();
    assert_eq!(sector_size, 2048);
    req.check().unwrap();
    assert_eq!(req.partition_count().unwrap(), partitions);
    let witnesses = (0..partitions)
        .map(|k| {
            let witness = record_both(|e| req.record_partition(k, e), kind);
            assert_sound(&witness, &verifier_post_inputs(proof, sectors, k), kind);
            witness
        })
        .collect();
    (req, vanilla, witnesses)
}

#[test]
fn winning_post_partition_is_the_verifiers() {
    let (req, _, _) = whole_request(WINNING, &[&sectors()[0]], 1);
    assert_eq!(req.kind_and_sector_size().0, Kind::WinningPost);
}

#[test]
fn window_post_one_partition_is_the_verifiers() {
    let two: Vec<&Sector> = sectors()[..2].iter().collect();
    let (req, _, _) = whole_request(WINDOW, &two, 1);
    assert_eq!(req.kind_and_sector_size().0, Kind::WindowPost);
}

#[test]
fn window_post_two_partitions_whole_and_single_are_the_verifiers() {
    let all: Vec<&Sector> = sectors().iter().collect();
    let (whole, vanilla, witnesses) = whole_request(WINDOW, &all, 2);
    // Curio's split: each partition's own sectors, with their partition index.
    let parts = [(0, &vanilla[..2]), (1, &vanilla[2..])];
    for ((k, own), witness) in parts.into_iter().zip(&witnesses) {
        let expected = verifier_post_inputs(WINDOW, &all, k);
        let single = request(WINDOW, own.to_vec(), Some(k));
        single.check().unwrap();
        assert_eq!(single.partition_count().unwrap(), 1);
        let alone = record_both(|e| single.record_partition(0, e), Kind::WindowPost);
        assert_sound(&alone, &expected, Kind::WindowPost);
        assert_eq!(alone.aux, witness.aux, "partition {k}");
    }
    let err = refusal(whole.record_partition(2, Evaluation::Direct));
    assert!(err.contains("partition 2 of a 2-partition"), "{err}");
}

#[test]
fn snap_deals_partitions_are_the_verifiers() {
    let update = fixtures::update(&sectors()[0]).unwrap();
    let req = UpdateRequest {
        registered_proof: UPDATE,
        comm_r_old: update.comm_r_old,
        comm_r_new: update.comm_r_new,
        comm_d_new: update.comm_d_new,
        vanilla_proofs: update.vanilla_proofs.clone(),
    };
    req.check().unwrap();
    assert_eq!(req.kind_and_sector_size(), (Kind::EmptySectorUpdate, 2048));
    let partitions = req.partition_count().unwrap();
    assert_eq!(partitions, update.vanilla_proofs.len());

    // As verify_empty_sector_update_proof sets up its public inputs.
    let config = SectorUpdateConfig::from_porep_config(&UPDATE.as_v1_config());
    let setup = compound_proof::SetupParams {
        vanilla_params: storage_proofs_update::SetupParams { sector_bytes: 2048 },
        partitions: Some(partitions),
        priority: true,
    };
    let pp = EmptySectorUpdateCompound::<Tree>::setup(&setup).unwrap();
    let public = storage_proofs_update::PublicInputs {
        k: partitions,
        comm_r_old: as_safe_commitment::<TreeRDomain, _>(&update.comm_r_old, "old").unwrap(),
        comm_d_new: as_safe_commitment(&update.comm_d_new, "d").unwrap(),
        comm_r_new: as_safe_commitment::<TreeRDomain, _>(&update.comm_r_new, "new").unwrap(),
        h: config.h,
    };
    for k in 0..partitions {
        let expected: Vec<Fr> = <EmptySectorUpdateCompound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            _,
        >>::generate_public_inputs(&public, &pp.vanilla_params, Some(k))
        .unwrap()
        .iter()
        .map(fr_from_blstrs)
        .collect();
        let witness = record_both(|e| req.record_partition(k, e), Kind::EmptySectorUpdate);
        assert_sound(&witness, &expected, Kind::EmptySectorUpdate);
    }

    let refused = |r: &UpdateRequest| refusal(r.check());
    let mut wrong_new = req.clone();
    wrong_new.comm_r_new = update.comm_r_old;
    assert!(refused(&wrong_new).contains("not for this comm_r_new"));
    // The roots open to the commitments, but the data is another: only the
    // reference's verification, which check runs, sees it.
    let mut wrong_d = req.clone();
    wrong_d.comm_d_new = update.comm_r_new;
    let err = refused(&wrong_d);
    assert!(
        err.contains("partition 0: the vanilla proof does not verify against comm_r_old, comm_r_new"),
        "{err}"
    );
    let mut wrong_old = req.clone();
    wrong_old.comm_r_old = update.comm_r_new;
    assert!(refused(&wrong_old).contains("not for this comm_r_old"));
    let mut garbage = req.clone();
    garbage.vanilla_proofs[0] = vec![7; 100];
    assert!(refused(&garbage).contains("vanilla proof 0 does not deserialize"));
    let mut extra = req.clone();
    extra.vanilla_proofs.push(update.vanilla_proofs[0].clone());
    let err = refused(&extra);
    assert!(
        err.contains(&format!(
            "takes {partitions} vanilla proof(s), one per partition, got {}",
            partitions + 1
        )),
        "{err}"
    );
}

#[test]
fn bad_post_requests_are_refused_with_the_reason() {
    let s = sectors();
    let winning = fixtures::post_vanilla_proofs(WINNING, RANDOMNESS, &[&s[0]]).unwrap();
    let window = fixtures::post_vanilla_proofs(WINDOW, RANDOMNESS, &[&s[0], &s[1], &s[2]]).unwrap();
    let refused = |req: PostRequest| refusal(req.check());

    // The PoSt kinds share their input's form: the kind a job was submitted
    // as admits only its own registered proofs.
    let proof_of = |req: PostRequest| req.registered_proof();
    let err = refusal(Kind::WindowPost.admit(proof_of(request(WINNING, winning.clone(), None))));
    assert!(err.contains("StackedDrgWinning2KiBV1 is a winning-post proof, not window-post"), "{err}");
    let err = refusal(Kind::WinningPost.admit(proof_of(request(WINDOW, window.clone(), None))));
    assert!(err.contains("is a window-post proof, not winning-post"), "{err}");

    let err = refused(request(WINNING, vec![vec![1; 64]], None));
    assert!(
        err.contains("vanilla proof 0 does not deserialize as a StackedDrgWinning2KiBV1 sector proof"),
        "{err}"
    );
    // A WindowPoSt vanilla proof answers 10 challenges, a WinningPoSt one 66.
    let err = refused(request(WINNING, vec![window[0].clone()], None));
    assert!(err.contains("holds 1 sector proofs with 10 challenges"), "{err}");

    let two = vec![winning[0].clone(), winning[0].clone()];
    let err = refused(request(WINNING, two, None));
    assert!(err.contains("takes 1 vanilla proof(s), got 2"), "{err}");
    let err = refused(request(WINNING, vec![], None));
    assert!(err.contains("no vanilla proofs"), "{err}");
    let err = refused(request(WINDOW, window.clone(), Some(0)));
    assert!(
        err.contains("partition 0: a StackedDrgWindow2KiBV1_2 partition holds at most 2 sectors, got 3"),
        "{err}"
    );
    let twice = vec![window[0].clone(), window[0].clone()];
    let err = refused(request(WINDOW, twice, None));
    assert!(err.contains("sector 1 has more than one vanilla proof"), "{err}");

    let err = refused(request(WINNING, winning.clone(), Some(1)));
    assert!(err.contains("partition_index 1 given for StackedDrgWinning2KiBV1"), "{err}");
    let single = request(WINDOW, window[2..].to_vec(), Some(1));
    let err = refusal(single.record_partition(1, Evaluation::Direct));
    assert!(err.contains("partition 1 of a 1-partition"), "{err}");

    // Well formed, but drawn for other randomness: filecoin-proofs' vanilla
    // verification refuses them at check, and again before the circuit is
    // built.
    let mut other = request(WINDOW, window, None);
    other.randomness[0] ^= 1;
    for err in [refused(other.clone()), refusal(other.record_partition(0, Evaluation::Direct))] {
        assert!(err.contains("partition 0: partitioned vanilla proofs failed to verify"), "{err}");
    }
}
