//! Filecoin's Groth16 parameter files: where they live, what they are named, and
//! their contents as arkworks types.
//!
//! A `.params` file holds the verifying key, then for each of h, l, a, b_g1 and
//! b_g2 a big-endian u32 count and that many uncompressed points (bellperson
//! 0.27's `Parameters::write`). A `.vk` file is the verifying key alone; a
//! `.meta` file is `{"sector_size":N}`. Points use the zcash encoding, which is
//! also arkworks' for BLS12-381, so the bytes map one to one.

mod codec;
mod source;

use std::path::{Path, PathBuf};

use ark_bls12_381::{Bls12_381, G1Affine, G2Affine};

pub use codec::{read_vk, write_vk, MappedParams, ParamsWriter, QueryCounts};
pub use source::QueryFile;

/// Where filecoin-proofs looks when `FIL_PROOFS_PARAMETER_CACHE` is unset.
pub const DEFAULT_PARAMETER_DIR: &str = "/var/tmp/filecoin-proof-parameters";

/// The environment variable operators already set for filecoin-proofs.
pub const PARAMETER_DIR_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// The parameter directory: `explicit` if given, else `FIL_PROOFS_PARAMETER_CACHE`,
/// else `/var/tmp/filecoin-proof-parameters`, the order operators expect from
/// filecoin-proofs.
pub fn parameter_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    match std::env::var_os(PARAMETER_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(DEFAULT_PARAMETER_DIR),
    }
}

/// The three files of one circuit, named as storage-proofs-core names them
/// (`v28-<cache id>.params`, `.vk`, `.meta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamPaths {
    /// The proving parameters (verifying key included).
    pub params: PathBuf,
    /// The verifying key alone, which the verifiers read.
    pub vk: PathBuf,
    /// `{"sector_size":N}`, which filecoin-proofs writes beside them.
    pub meta: PathBuf,
}

/// The `.params` files in `dir`, by cache id: what an operator has.
pub fn cache_ids_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            let id = name.strip_suffix(".params")?;
            let id = id.strip_prefix(&parameter_prefix())?;
            Some((id.to_string(), entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// The `.params` file of `cache_id` in `dir`, refused (naming both) when it
/// is not there: nothing of that circuit can be proved without it.
pub fn params_file(dir: &Path, cache_id: &str) -> Result<PathBuf, crate::Error> {
    let path = ParamPaths::new(dir, cache_id).params;
    if path.is_file() {
        Ok(path)
    } else {
        Err(crate::Error::MissingParams { path, dir: dir.to_path_buf() })
    }
}

/// What storage-proofs-core puts before a cache id in a file name (`v28-`).
fn parameter_prefix() -> String {
    let named = storage_proofs_core::parameter_cache::parameter_id("");
    named.strip_suffix(".params").unwrap_or(&named).to_string()
}

impl ParamPaths {
    /// The paths filecoin-proofs gives the circuit `cache_id` in `dir`.
    pub fn new(dir: &Path, cache_id: &str) -> Self {
        use storage_proofs_core::parameter_cache::{metadata_id, parameter_id, verifying_key_id};
        ParamPaths {
            params: dir.join(parameter_id(cache_id)),
            vk: dir.join(verifying_key_id(cache_id)),
            meta: dir.join(metadata_id(cache_id)),
        }
    }
}

/// bellperson's verifying key: arkworks' plus beta_g1 and delta_g1, which the
/// prover needs and the file carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKey {
    /// alpha·G1, in the proof's A and the pairing check.
    pub alpha_g1: G1Affine,
    /// beta·G1, in the proof's B in G1 (needed for C).
    pub beta_g1: G1Affine,
    /// beta·G2, in the proof's B and the pairing check.
    pub beta_g2: G2Affine,
    /// gamma·G2, pairs with the public inputs' sum.
    pub gamma_g2: G2Affine,
    /// delta·G1, the randomizer of A, B and C.
    pub delta_g1: G1Affine,
    /// delta·G2, pairs with C.
    pub delta_g2: G2Affine,
    /// One point per public input, the constant one first (arkworks' gamma_abc_g1).
    pub ic: Vec<G1Affine>,
}

impl VerifyingKey {
    /// The same key as ark-groth16 verifies with.
    pub fn to_ark(&self) -> ark_groth16::VerifyingKey<Bls12_381> {
        ark_groth16::VerifyingKey {
            alpha_g1: self.alpha_g1,
            beta_g2: self.beta_g2,
            gamma_g2: self.gamma_g2,
            delta_g2: self.delta_g2,
            gamma_abc_g1: self.ic.clone(),
        }
    }
}

/// A whole `.params` file in memory. a, b_g1 and b_g2 hold only the variables
/// that are dense in their query (bellperson drops the identity points); b_g1
/// and b_g2 list the B-dense inputs first, then the B-dense aux variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameters {
    /// Written first, also alone as the `.vk` file.
    pub vk: VerifyingKey,
    /// tau^i · t(tau) / delta for i < m − 1, m the domain size.
    pub h: Vec<G1Affine>,
    /// (beta·A + alpha·B + C)(tau) / delta per aux variable.
    pub l: Vec<G1Affine>,
    /// A(tau) of every input, then of every A-dense aux variable.
    pub a: Vec<G1Affine>,
    /// B(tau) in G1 of every B-dense variable.
    pub b_g1: Vec<G1Affine>,
    /// B(tau) in G2 of every B-dense variable.
    pub b_g2: Vec<G2Affine>,
}

impl Parameters {
    /// The lengths of the five queries, as the file's counts.
    pub fn counts(&self) -> QueryCounts {
        QueryCounts {
            ic: self.vk.ic.len(),
            h: self.h.len(),
            l: self.l.len(),
            a: self.a.len(),
            b_g1: self.b_g1.len(),
            b_g2: self.b_g2.len(),
        }
    }

    /// Writes the file in bellperson's layout.
    pub fn write(&self, path: &Path) -> Result<(), crate::Error> {
        let mut w = ParamsWriter::create(path, &self.vk)?;
        for g1 in [&self.h, &self.l, &self.a, &self.b_g1] {
            w.begin(g1.len())?;
            w.points(g1)?;
        }
        w.begin(self.b_g2.len())?;
        w.points(&self.b_g2)?;
        w.finish()
    }
}
