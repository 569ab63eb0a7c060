//! Filecoin's parameter files held in memory: preloading one into the key
//! store (a prepared circuit, loaded as the backend's jobs load it and
//! counted in the budget's resident bytes) and evicting it, for both front ends (HTTP's
//! `/v1/params/{id}/preload` and `/evict`, gRPC's `PreloadSRS` and
//! `EvictSRS`), with the budget told of every change.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_actors::messages::budget::SetResident;
use cuzk_actors::ProvingSystem;
use cuzk_filecoin::Kind;

use crate::filecoin::CircuitLoading;
use crate::keys::{KeyStore, PrepareError};

/// The parameter directory and the key store its files are loaded into.
pub struct ParamFiles {
    /// Where the `.params` files are (`params_dir`).
    pub dir: PathBuf,
    /// Holds the loaded files' prepared circuits.
    keys: Arc<KeyStore>,
    /// The budget, told when the resident bytes change, and the backend
    /// that counts them.
    system: ProvingSystem,
    /// Loads a file as the backend's jobs would (the key store keeps
    /// whichever load comes first).
    loading: Arc<CircuitLoading>,
}

/// Why a file was not preloaded or evicted; each front end answers the
/// kinds differently (HTTP 404, 422, 500).
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("no parameter file for {id:?} in {dir}")]
    NoFile { id: String, dir: String },
    #[error("{0:?} names no circuit of a registered proof")]
    NoCircuit(String),
    /// The file does not decode, or does not fit its circuit.
    #[error("loading {id}: {cause}")]
    Load { id: String, cause: Arc<PrepareError> },
    /// The thread decoding it died.
    #[error("loading {id} did not finish: {cause}")]
    Thread { id: String, cause: actix_rt::task::JoinError },
    #[error("parameters {0:?} are not loaded")]
    NotLoaded(String),
}

/// A file loaded by `preload`.
#[derive(Debug)]
pub struct Preloaded {
    /// What it holds in memory, counted in the budget.
    pub resident_bytes: u64,
    /// It was loaded before this call (by a job or an earlier preload).
    pub already_loaded: bool,
    /// How long this call took.
    pub took: Duration,
}

impl ParamFiles {
    pub fn new(dir: PathBuf, keys: Arc<KeyStore>, system: ProvingSystem, loading: CircuitLoading) -> Self {
        Self { dir, keys, system, loading: Arc::new(loading) }
    }

    /// The `.params` file of cache id `id` in the parameter directory.
    pub fn file(&self, id: &str) -> Option<PathBuf> {
        cuzk_filecoin::params::cache_ids_in(&self.dir)
            .into_iter()
            .find_map(|(file_id, path)| (file_id == id).then_some(path))
    }

    /// Cache id → resident bytes of every key loaded now.
    pub fn loaded(&self) -> BTreeMap<String, u64> {
        self.keys.loaded()
    }

    /// Loads `id`'s file, unless it is loaded already: jobs of its circuit
    /// then start without the load. Decoding a large file takes minutes,
    /// on a blocking thread.
    pub async fn preload(&self, id: &str) -> Result<Preloaded, ParamsError> {
        let started = Instant::now();
        let path = self.file(id).ok_or_else(|| ParamsError::NoFile {
            id: id.to_string(),
            dir: self.dir.display().to_string(),
        })?;
        let (kind, sector_size) = Kind::of_cache_id(id).ok_or_else(|| ParamsError::NoCircuit(id.to_string()))?;
        let already_loaded = self.keys.loaded().contains_key(id);
        let (keys, cache_id, loading) = (self.keys.clone(), id.to_string(), self.loading.clone());
        let loaded = actix_rt::task::spawn_blocking(move || {
            keys.prepared_with(&cache_id, || loading.load(&cache_id, &path, kind, sector_size, None))
        })
        .await
        .map_err(|cause| ParamsError::Thread { id: id.to_string(), cause })?
        .map_err(|cause| ParamsError::Load { id: id.to_string(), cause })?;
        self.update_budget();
        Ok(Preloaded { resident_bytes: loaded.resident_bytes(), already_loaded, took: started.elapsed() })
    }

    /// Drops `id`'s loaded file and answers the bytes it held; partitions
    /// running keep it until they finish.
    pub fn evict(&self, id: &str) -> Result<u64, ParamsError> {
        let held = self.keys.loaded().get(id).copied();
        match held {
            Some(bytes) if self.file(id).is_some() && self.keys.evict(id) => {
                self.update_budget();
                Ok(bytes)
            }
            _ => Err(ParamsError::NotLoaded(id.to_string())),
        }
    }

    /// Tells the budget the resident bytes changed, so admission counts a
    /// preloaded key, or no longer counts an evicted one, before the next
    /// partition's synthesis would.
    fn update_budget(&self) {
        self.system.budget.do_send(SetResident { bytes: self.system.backend.resident_bytes() });
    }
}
