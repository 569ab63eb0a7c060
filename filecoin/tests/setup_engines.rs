//! The setup's seam (`setup::FixedBaseMul`) carries everything an engine
//! changes: driven from one seed through a second, independent multiplier
//! (each point its own `g * s`, in batches of another size than the
//! default's), the generator writes the same `.params`, `.vk` and `.meta`
//! bytes as with the default CPU multiplier. The GPU engine is held to the
//! same files by tests/gpu_setup.rs. 2 KiB WindowPoSt: about 22 k
//! constraints, a few seconds. The blank circuit's shape, which the setup
//! records anyway, is kept for a daemon when asked (`cuzk params generate
//! --data-dir`), and is the shape the daemon would record itself.

use ark_bls12_381::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{CurveGroup, PrimeGroup};
use cuzk_filecoin::setup::{generate_from_seed, CpuFixedBase, FixedBaseMul, Generate};
use cuzk_filecoin::shape_cache::ShapeCache;
use cuzk_filecoin::{Error, Kind};

use rayon::prelude::*;

/// Double-and-add per scalar (arkworks' `Projective * Fr`), no table.
struct PerScalar;

impl FixedBaseMul for PerScalar {
    fn batch(&self) -> usize {
        1000
    }
    fn g1(&self, scalars: &[Fr]) -> Result<Vec<G1Affine>, Error> {
        Ok(scalars.par_iter().map(|s| (G1Projective::generator() * s).into_affine()).collect())
    }
    fn g2(&self, scalars: &[Fr]) -> Result<Vec<G2Affine>, Error> {
        Ok(scalars.par_iter().map(|s| (G2Projective::generator() * s).into_affine()).collect())
    }
}

fn files(seed: [u8; 32], mul: &dyn FixedBaseMul) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    generate_from_seed(seed, &Generate::new(2048, &[Kind::WindowPost], dir.path()), mul)
        .unwrap()
        .into_iter()
        .map(|f| {
            let name = f.path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&f.path).unwrap())
        })
        .collect()
}

#[test]
fn an_independent_multiplier_writes_the_same_files() {
    let seed = [0x5e; 32];
    let default = files(seed, &CpuFixedBase::default());
    let independent = files(seed, &PerScalar);
    assert_eq!(default.len(), 3, ".params, .vk and .meta");
    for ((name, want), (other, got)) in default.iter().zip(&independent) {
        assert_eq!(name, other);
        assert!(want == got, "{name} differs between the multipliers");
    }
}

#[test]
fn the_setup_keeps_the_shape_a_daemon_would_record() {
    let (params, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let room = |_: u64| true;
    let cache = ShapeCache { dir: data.path(), room: &room };
    let kinds = [Kind::WindowPost];
    let what = Generate { shapes: Some(&cache), ..Generate::new(2048, &kinds, params.path()) };
    generate_from_seed([0x5e; 32], &what, &CpuFixedBase::default()).unwrap();
    let blank = Kind::WindowPost.blank(2048).unwrap();
    let kept = cache.load(&blank.cache_id).expect("the setup kept the shape under its cache id");
    assert_eq!(kept.constraints, blank.shape.constraints);
    assert_eq!(kept.densities, blank.shape.densities);
    for k in 0..3 {
        assert_eq!(kept.matrices.parts(k), blank.shape.matrices.parts(k), "matrix {k}");
    }
}
