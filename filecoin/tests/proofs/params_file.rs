//! The `.params` and `.vk` layout against files bellperson itself wrote: the
//! reader decodes them into the points bellperson holds, the writer reproduces
//! them byte for byte, and the recorded shape predicts every query's length.

use ark_serialize::CanonicalDeserialize;
use bellperson::groth16;
use cuzk_filecoin::params::{read_vk, write_vk, MappedParams};
use cuzk_filecoin::record::record_shape;
use cuzk_filecoin::setup::predicted_counts;
use cuzk_filecoin::Error;
use filecoin_proofs::constants::SectorShape2KiB;
use filecoin_proofs::parameters::window_post_public_params;
use filecoin_proofs_api::RegisteredPoStProof;
use rand::SeedableRng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};

type Tree = SectorShape2KiB;

fn blank_window_post() -> FallbackPoStCircuit<Tree> {
    let config = RegisteredPoStProof::StackedDrgWindow2KiBV1_2.as_v1_config();
    let pp = window_post_public_params::<Tree>(&config).unwrap();
    <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp)
}

fn g1_from_compressed(p: &blstrs::G1Affine) -> ark_bls12_381::G1Affine {
    ark_bls12_381::G1Affine::deserialize_compressed(&p.to_compressed()[..]).unwrap()
}

fn g2_from_compressed(p: &blstrs::G2Affine) -> ark_bls12_381::G2Affine {
    ark_bls12_381::G2Affine::deserialize_compressed(&p.to_compressed()[..]).unwrap()
}

#[test]
fn bellperson_files_read_and_rewrite_exactly() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let params =
        groth16::generate_random_parameters::<blstrs::Bls12, _, _>(blank_window_post(), &mut rng).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("bellperson.params");
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    std::fs::write(&original, &bytes).unwrap();

    let mapped = MappedParams::open(&original).unwrap();
    let shape = record_shape(blank_window_post()).unwrap();
    assert_eq!(mapped.counts(), predicted_counts(&shape));
    assert_eq!(mapped.counts().file_bytes(), bytes.len() as u64);

    // Compressed encodings take another decoding path: the points must agree.
    let loaded = mapped.load().unwrap();
    assert_eq!(loaded.vk.alpha_g1, g1_from_compressed(&params.vk.alpha_g1));
    assert_eq!(loaded.vk.delta_g2, g2_from_compressed(&params.vk.delta_g2));
    assert_eq!(loaded.vk.ic.len(), params.vk.ic.len());
    for (i, p) in [0, params.h.len() / 2, params.h.len() - 1].map(|i| (i, params.h[i])) {
        assert_eq!(loaded.h[i], g1_from_compressed(&p));
    }
    assert_eq!(loaded.l[3], g1_from_compressed(&params.l[3]));
    assert_eq!(loaded.a.last().copied(), params.a.last().map(g1_from_compressed));
    assert_eq!(loaded.b_g1[1], g1_from_compressed(&params.b_g1[1]));
    assert_eq!(loaded.b_g2[1], g2_from_compressed(&params.b_g2[1]));

    let rewritten = dir.path().join("rewritten.params");
    loaded.write(&rewritten).unwrap();
    assert!(std::fs::read(&rewritten).unwrap() == bytes);

    let vk_path = dir.path().join("bellperson.vk");
    let mut vk_bytes = Vec::new();
    params.vk.write(&mut vk_bytes).unwrap();
    std::fs::write(&vk_path, &vk_bytes).unwrap();
    assert_eq!(read_vk(&vk_path).unwrap(), loaded.vk);
    let vk_again = dir.path().join("again.vk");
    write_vk(&vk_again, &loaded.vk).unwrap();
    assert_eq!(std::fs::read(&vk_again).unwrap(), vk_bytes);

    // A truncated file is refused with its reason, not read short.
    let truncated = dir.path().join("truncated.params");
    std::fs::write(&truncated, &bytes[..bytes.len() - 1]).unwrap();
    match MappedParams::open(&truncated) {
        Err(Error::Malformed { reason, .. }) => assert!(reason.contains("b_g2"), "{reason}"),
        other => panic!("expected a malformed-file error, got {:?}", other.map(|m| m.counts())),
    }
}
