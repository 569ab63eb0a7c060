//! A key of a circuit's real shape for timing only: `.params`, `.vk` and
//! `.meta` files in filecoin-proofs' layout and names, whose queries have
//! exactly the lengths the circuit's blank synthesis gives, filled with random
//! subgroup points. No toxic waste relates the points, so a proof made with
//! such a key never verifies: it exists so that the daemon and supraseal-c2
//! can load the same 32 GiB or 64 GiB file and be timed on it, where a true
//! setup of 130 million constraints does not fit one run of the machines
//! here. Correctness at those sizes rests on the circuits' own checks and on
//! the 2 KiB proofs verified with keys from [`crate::setup`].
//!
//! The points are random multiples of the generators, so they lie in the
//! prime-order subgroups as any key's do; drawing each one by a scalar
//! multiplication would take hours for the 560 million points of a 32 GiB
//! PoRep key, so each run of [`RUN`] points walks from a random multiple by
//! a random step (one addition per point) and is brought to affine form in
//! one batch inversion.

use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use ark_bls12_381::{Fr, G1Projective, G2Projective};
use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::UniformRand;
use ark_serialize::CanonicalSerialize;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::params::{write_vk, ParamPaths, ParamsWriter, QueryCounts, VerifyingKey};
use crate::setup::{predicted_counts, GeneratedFile};
use crate::{Error, Kind};

/// Points per walk: one random start and step each, one batch inversion.
const RUN: usize = 1 << 12;

/// Points generated (in parallel) and then written per batch: bounds the
/// memory held (two batches of G2 points, about 0.8 GB) while keeping every
/// core busy.
const BATCH: usize = 1 << 21;

/// Writes the `.params`, `.vk` and `.meta` files of `kind` at `sector_size`
/// into `out`, named as filecoin-proofs names them, with random points from
/// `seed` (the same seed writes the same files). TIMING ONLY: proofs made
/// with it do not verify.
pub fn write_timing_key(
    kind: Kind,
    sector_size: u64,
    out: &Path,
    seed: [u8; 32],
) -> Result<Vec<GeneratedFile>, Error> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let start = Instant::now();
    let blank = kind.blank_counts(sector_size)?;
    let counts = predicted_counts(&blank.shape);
    log::info!(
        "{} {sector_size} B: {} constraints, {} inputs, {} aux counted in {:.1?}; queries {counts:?}",
        kind.cli_name(),
        blank.shape.num_constraints(),
        blank.shape.num_inputs(),
        blank.shape.num_aux(),
        start.elapsed()
    );
    let paths = ParamPaths::new(out, &blank.cache_id);
    log::warn!(
        "writing a TIMING-ONLY key ({} bytes, random points: proofs made with it do not verify) to {}",
        counts.file_bytes(),
        paths.params.display()
    );
    let vk = write_params(&counts, &paths.params, seed)?;
    write_vk(&paths.vk, &vk)?;
    let meta = serde_json::to_vec(&blank.meta).map_err(|e| Error::Setup(e.to_string()))?;
    std::fs::write(&paths.meta, meta).map_err(|e| Error::io(&paths.meta, e))?;
    log::info!("{} written in {:.1?}", paths.params.display(), start.elapsed());
    [paths.params, paths.vk, paths.meta]
        .into_iter()
        .map(|path| {
            let bytes = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
            Ok(GeneratedFile { kind, path, bytes })
        })
        .collect()
}

/// Streams a `.params` file of `counts` random points to `path` (through a
/// temporary name, so a reader never sees half a file) and returns its
/// verifying key. The next batch is drawn while the last one is written.
fn write_params(counts: &QueryCounts, path: &Path, seed: [u8; 32]) -> Result<VerifyingKey, Error> {
    let vk = VerifyingKey {
        alpha_g1: random_points::<G1Projective>(seed, Stream::Vk, 0, 1)[0],
        beta_g1: random_points::<G1Projective>(seed, Stream::Vk, 1, 1)[0],
        beta_g2: random_points::<G2Projective>(seed, Stream::Vk, 2, 1)[0],
        gamma_g2: random_points::<G2Projective>(seed, Stream::Vk, 3, 1)[0],
        delta_g1: random_points::<G1Projective>(seed, Stream::Vk, 4, 1)[0],
        delta_g2: random_points::<G2Projective>(seed, Stream::Vk, 5, 1)[0],
        ic: random_points::<G1Projective>(seed, Stream::Ic, 0, counts.ic),
    };
    let tmp = path.with_extension("params.partial");
    let mut writer = ParamsWriter::create(&tmp, &vk)?;
    let g1 =
        [(Stream::H, counts.h), (Stream::L, counts.l), (Stream::A, counts.a), (Stream::BG1, counts.b_g1)];
    for (stream, count) in g1 {
        writer.begin(count)?;
        write_query::<G1Projective>(&mut writer, seed, stream, count)?;
    }
    writer.begin(counts.b_g2)?;
    write_query::<G2Projective>(&mut writer, seed, Stream::BG2, counts.b_g2)?;
    writer.finish()?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(vk)
}

/// Which part of the key a run of points is drawn for: each part has its own
/// random streams, so no two parts share points.
#[derive(Clone, Copy)]
enum Stream {
    Vk,
    Ic,
    H,
    L,
    A,
    BG1,
    BG2,
}

/// Draws `count` points of one query batch by batch on every core, while a
/// thread of its own writes the batch before (the writer only encodes and
/// copies, so drawing and writing overlap).
fn write_query<C>(
    writer: &mut ParamsWriter,
    seed: [u8; 32],
    stream: Stream,
    count: usize,
) -> Result<(), Error>
where
    C: CurveGroup + PrimeGroup<ScalarField = Fr>,
    C::Affine: CanonicalSerialize + Sync + Send,
{
    let (send, receive) = sync_channel::<Vec<C::Affine>>(1);
    std::thread::scope(|scope| {
        let drawing = scope.spawn(move || {
            for (index, first) in (0..count).step_by(BATCH).enumerate() {
                let len = BATCH.min(count - first);
                if send.send(random_points::<C>(seed, stream, index as u64, len)).is_err() {
                    // The writer failed; its error is reported below.
                    return;
                }
            }
        });
        let written = receive.iter().try_for_each(|batch| writer.points(&batch));
        // Dropping the receiver ends the drawing thread if the write failed.
        drop(receive);
        drawing.join().expect("drawing random points does not panic");
        written
    })
}

/// `len` random points of batch `index` of `stream`: runs of [`RUN`] points,
/// each a walk start + i * step from its own random start and step, made
/// affine together.
fn random_points<C>(seed: [u8; 32], stream: Stream, index: u64, len: usize) -> Vec<C::Affine>
where
    C: CurveGroup + PrimeGroup<ScalarField = Fr>,
{
    let runs = len.div_ceil(RUN);
    let mut points = Vec::with_capacity(len);
    points.par_extend((0..runs).into_par_iter().flat_map_iter(|run| {
        let mut rng = ChaCha20Rng::from_seed(seed);
        // One stream of the cipher per run: runs are drawn independently.
        rng.set_stream(((stream as u64) << 56) ^ (index << 24) ^ run as u64);
        let mut point = C::generator() * Fr::rand(&mut rng);
        let step = C::generator() * Fr::rand(&mut rng);
        let n = RUN.min(len - run * RUN);
        let walk: Vec<C> = (0..n)
            .map(|_| {
                let p = point;
                point += step;
                p
            })
            .collect();
        C::normalize_batch(&walk)
    }));
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::MappedParams;
    use ark_ec::short_weierstrass::{Affine, SWCurveConfig};

    fn in_subgroup<P: SWCurveConfig>(p: &Affine<P>) -> bool {
        !p.infinity && p.is_on_curve() && p.is_in_correct_subgroup_assuming_on_curve()
    }

    #[test]
    fn points_are_distinct_subgroup_points_and_reproducible() {
        let seed = [7; 32];
        let g1 = random_points::<G1Projective>(seed, Stream::H, 3, RUN + 5);
        let g2 = random_points::<G2Projective>(seed, Stream::BG2, 0, 70);
        assert_eq!(g1.len(), RUN + 5);
        assert!(g1.iter().all(in_subgroup) && g2.iter().all(in_subgroup));
        let mut sorted: Vec<Vec<u8>> = g1
            .iter()
            .map(|p| {
                let mut bytes = Vec::new();
                p.serialize_uncompressed(&mut bytes).unwrap();
                bytes
            })
            .collect();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), g1.len(), "no point repeats");
        assert_eq!(g1, random_points::<G1Projective>(seed, Stream::H, 3, RUN + 5));
        assert_ne!(g1[..5], random_points::<G1Projective>(seed, Stream::L, 3, 5)[..]);
    }

    #[test]
    fn the_winning_post_key_has_the_blank_circuits_counts_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_timing_key(Kind::WinningPost, 2048, dir.path(), [1; 32]).unwrap();
        let params = files.iter().find(|f| f.path.extension().is_some_and(|e| e == "params")).unwrap();
        let mapped = MappedParams::open(&params.path).unwrap();
        let blank = Kind::WinningPost.blank_counts(2048).unwrap();
        assert_eq!(mapped.counts(), predicted_counts(&blank.shape));
        assert_eq!(params.bytes, mapped.counts().file_bytes());
        let h = mapped.h().unwrap();
        assert_eq!(h.len(), mapped.counts().h);
        assert!(h.iter().take(100).all(in_subgroup));
        assert!(mapped.b_g2().unwrap().iter().take(20).all(in_subgroup));
        assert_eq!(crate::params::read_vk(&files[1].path).unwrap(), mapped.vk);
    }
}
