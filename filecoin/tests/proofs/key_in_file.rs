//! A key left in its parameter file and a compiled shape kept on disk, on the
//! 2 KiB WinningPoSt parameters: the file read by range gives exactly the
//! points decoding the whole file gives (B's missing lead included), a bad
//! range or a damaged point is an error, a circuit loaded with its key in the
//! file pairs the same points with the same variables, and a shape read back
//! from disk is the recorded one while a damaged or foreign file is removed,
//! never used.

use std::path::PathBuf;

use ark_bls12_381::{G1Affine, G2Affine};
use ark_ec::AffineRepr;
use cuzk_filecoin::fixtures;
use cuzk_filecoin::params::{params_file, MappedParams, QueryFile};
use cuzk_filecoin::prepare::{load_circuit, LoadOptions};
use cuzk_filecoin::shape_cache::ShapeCache;
use cuzk_filecoin::Kind;
use cuzk_kernels::cpu::CpuEngine;
use cuzk_kernels::groth16::{Abc, ProveStartEngine, Synthesized};
use cuzk_kernels::key_source::{g1_words, g2_words, KeySource, Query, G1_WORDS, G2_WORDS};
use cuzk_kernels::KernelError;

/// A key source's read of G1 points in the kernels' layout: a range's
/// start and the words to fill.
type ReadWords<'a> = dyn Fn(usize, &mut [u64]) -> Result<(), KernelError> + 'a;

const SECTOR: u64 = 2048;

fn winning_params() -> (String, PathBuf) {
    fixtures::ensure_params(&[Kind::WinningPost]).unwrap();
    let id = Kind::WinningPost.cache_id(SECTOR).unwrap();
    let path = params_file(fixtures::params_dir(), &id).unwrap();
    (id, path)
}

/// Reads `len` points through `read` in ranges of `step` (odd, so ranges
/// straddle the lead and end short).
fn by_range<P: Clone + Default>(
    len: usize,
    step: usize,
    read: impl Fn(usize, &mut [P]) -> Result<(), KernelError>,
) -> Vec<P> {
    let mut out = vec![P::default(); len];
    for (i, chunk) in out.chunks_mut(step).enumerate() {
        read(i * step, chunk).unwrap();
    }
    out
}

#[test]
fn the_file_read_by_range_gives_the_decoded_points() {
    let (_, path) = winning_params();
    let mapped = MappedParams::open(&path).unwrap();
    let whole = mapped.load().unwrap();
    for b_lead in [false, true] {
        let source = QueryFile::open(&mapped, b_lead).unwrap();
        let lead = usize::from(b_lead);
        for (q, want) in [(Query::H, &whole.h), (Query::L, &whole.l), (Query::A, &whole.a)] {
            assert_eq!(source.len(q), want.len(), "{q:?}");
            assert!(&by_range::<G1Affine>(want.len(), 977, |s, o| source.g1(q, s, o)) == want, "{q:?}");
        }
        let mut b1 = vec![G1Affine::zero(); lead];
        b1.extend(&whole.b_g1);
        let mut b2 = vec![G2Affine::zero(); lead];
        b2.extend(&whole.b_g2);
        assert_eq!((source.len(Query::B1), source.b2_len()), (b1.len(), b2.len()));
        assert!(
            by_range::<G1Affine>(b1.len(), 977, |s, o| source.g1(Query::B1, s, o)) == b1,
            "b_g1, lead {b_lead}"
        );
        assert!(by_range::<G2Affine>(b2.len(), 331, |s, o| source.g2(s, o)) == b2, "b_g2, lead {b_lead}");
        // In the kernels' layout, as the CUDA engine takes them.
        let words = |want: &[G1Affine], read: &ReadWords<'_>| {
            let got = by_range::<[u64; G1_WORDS]>(want.len(), 977, |s, o| read(s, o.as_flattened_mut()));
            want.iter().zip(&got).all(|(p, w)| {
                let mut expected = [0u64; G1_WORDS];
                g1_words(p, &mut expected);
                expected == *w
            })
        };
        assert!(words(&whole.h, &|s, o| source.g1_words(Query::H, s, o)), "h as words");
        assert!(words(&b1, &|s, o| source.g1_words(Query::B1, s, o)), "b_g1 as words, lead {b_lead}");
        let got = by_range::<[u64; G2_WORDS]>(b2.len(), 331, |s, o| source.g2_words(s, o.as_flattened_mut()));
        assert!(
            b2.iter().zip(&got).all(|(p, w)| {
                let mut expected = [0u64; G2_WORDS];
                g2_words(p, &mut expected);
                expected == *w
            }),
            "b_g2 as words, lead {b_lead}"
        );
        // Ranges out of order (the range read ahead is not the one asked
        // for): the same points.
        let step = 613;
        let mut shuffled = vec![G1Affine::zero(); whole.l.len()];
        let starts: Vec<usize> = (0..whole.l.len()).step_by(step).collect();
        for &start in starts.iter().rev().chain(starts.iter().step_by(2)) {
            let end = (start + step).min(whole.l.len());
            source.g1(Query::L, start, &mut shuffled[start..end]).unwrap();
            let mut other = [G1Affine::zero(); 3];
            source.g1(Query::H, start.min(whole.h.len() - 3), &mut other).unwrap();
            assert!(other[..] == whole.h[start.min(whole.h.len() - 3)..][..3]);
        }
        assert!(shuffled == whole.l, "l read backwards, between reads of h");
        // Past the end is an error, not a short read.
        let mut one = [G1Affine::zero()];
        let past = source.g1(Query::H, whole.h.len(), &mut one).unwrap_err();
        assert!(past.to_string().contains("h: points"), "{past}");
    }
}

#[test]
fn a_damaged_point_in_the_file_is_an_error_naming_it() {
    let (_, path) = winning_params();
    let mut bytes = std::fs::read(&path).unwrap();
    let mapped = MappedParams::open(&path).unwrap();
    let counts = mapped.counts();
    // The h query starts right after the verifying key and its count; move
    // one coordinate of h[5] off the curve.
    let h_start = (3 * 96 + 3 * 192 + 4 + counts.ic * 96) + 4;
    bytes[h_start + 5 * 96 + 95] ^= 1;
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.params");
    std::fs::write(&damaged, &bytes).unwrap();
    let source = QueryFile::open(&MappedParams::open(&damaged).unwrap(), false).unwrap();
    let mut out = vec![G1Affine::zero(); 16];
    let e = source.g1(Query::H, 0, &mut out).unwrap_err();
    assert!(e.to_string().contains("point 5"), "{e}");
    source.g1(Query::H, 6, &mut out).unwrap();
}

#[test]
fn a_circuit_with_its_key_in_the_file_pairs_the_same_points() {
    let (id, path) = winning_params();
    let decoded = load_circuit(&id, &path, Kind::WinningPost, SECTOR, None, LoadOptions::default()).unwrap();
    let options = LoadOptions { key_in_file: true, shapes: None };
    let in_file = load_circuit(&id, &path, Kind::WinningPost, SECTOR, None, options).unwrap();
    let source = in_file.key_source.as_ref().expect("the key stays in the file");
    let (pk, head) = (&decoded.pk, &in_file.pk);
    assert_eq!(head.vk, pk.vk);
    assert_eq!((head.beta_g1, head.delta_g1), (pk.beta_g1, pk.delta_g1));
    assert_eq!(head.a_query[..], pk.a_query[..1]);
    assert_eq!(head.b_g1_query[..], pk.b_g1_query[..1]);
    assert_eq!(head.b_g2_query[..], pk.b_g2_query[..1]);
    assert!(head.h_query.is_empty() && head.l_query.is_empty());
    assert_eq!(
        (in_file.a_selection.clone(), in_file.b_selection.clone()),
        (decoded.a_selection.clone(), decoded.b_selection.clone())
    );
    assert_eq!(
        (in_file.num_constraints, in_file.domain_size),
        (decoded.num_constraints, decoded.domain_size)
    );
    // The source pairs point i with what the decoded key pairs it with.
    for (q, want) in [
        (Query::A, &pk.a_query),
        (Query::B1, &pk.b_g1_query),
        (Query::L, &pk.l_query),
        (Query::H, &pk.h_query),
    ] {
        assert!(&by_range::<G1Affine>(want.len(), 4099, |s, o| source.g1(q, s, o)) == want, "{q:?}");
    }
    assert!(by_range::<G2Affine>(pk.b_g2_query.len(), 4099, |s, o| source.g2(s, o)) == pk.b_g2_query);
    // Held on the host: the matrices and three points, not the key.
    assert!(
        in_file.resident_bytes() < decoded.resident_bytes() / 2,
        "{} vs {}",
        in_file.resident_bytes(),
        decoded.resident_bytes()
    );
    // An engine that reads whole queries refuses it instead of proving with
    // an empty key.
    let nothing = Synthesized { abc: Abc::Deferred, assignment: Vec::new(), num_inputs: 0 };
    let refused = CpuEngine::new(1).unwrap().prove_start(&in_file, nothing).err().expect("refused");
    assert!(matches!(refused, KernelError::Key(ref why) if why.contains("parameter file")), "{refused}");
}

#[test]
fn a_kept_shape_is_read_back_and_a_damaged_one_is_removed() {
    let (id, path) = winning_params();
    let dir = tempfile::tempdir().unwrap();
    let room = |_: u64| true;
    let cache = ShapeCache { dir: dir.path(), room: &room };
    let recorded = Kind::WinningPost.blank(SECTOR).unwrap().shape;
    assert!(cache.load(&id).is_none(), "nothing kept yet");
    cache.store(&id, &recorded);
    let file = cache.path(&id);
    let read = cache.load(&id).expect("the kept shape");
    assert_eq!(read.matrices.fingerprint(), recorded.matrices.fingerprint());
    assert_eq!(
        (read.constraints, read.matrices.num_constraints()),
        (recorded.constraints, recorded.matrices.num_constraints())
    );
    for k in 0..3 {
        assert!(read.matrices.parts(k) == recorded.matrices.parts(k), "matrix {k}");
    }
    assert!(
        read.densities.a_aux == recorded.densities.a_aux
            && read.densities.b_input == recorded.densities.b_input
            && read.densities.b_aux == recorded.densities.b_aux
    );
    // A load through the cache gives the circuit the recording gives.
    let options = LoadOptions { key_in_file: false, shapes: Some(&cache) };
    let loaded = load_circuit(&id, &path, Kind::WinningPost, SECTOR, None, options).unwrap();
    assert_eq!(loaded.matrices.fingerprint(), recorded.matrices.fingerprint());

    // One flipped byte anywhere (here in the terms): not used, removed.
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    assert!(cache.load(&id).is_none(), "a damaged shape is not used");
    assert!(!file.exists(), "and removed");
    // Another circuit's shape under this name, and a truncated one, the same.
    cache.store("another-circuit", &recorded);
    std::fs::rename(cache.path("another-circuit"), &file).unwrap();
    assert!(cache.load(&id).is_none() && !file.exists(), "a foreign shape is not used");
    cache.store(&id, &recorded);
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() - 3]).unwrap();
    assert!(cache.load(&id).is_none() && !file.exists(), "a truncated shape is not used");
    // No room: nothing written.
    let full = |_: u64| false;
    ShapeCache { dir: dir.path(), room: &full }.store(&id, &recorded);
    assert!(!file.exists());
}
