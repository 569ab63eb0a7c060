//! Filecoin's parameter files held in memory: preloading one into the key
//! store (a prepared circuit, loaded as the backend's jobs load it and
//! counted in the budget's resident bytes) and evicting it, for both front ends (HTTP's
//! `/v1/params/{id}/preload` and `/evict`, gRPC's `PreloadSRS` and
//! `EvictSRS`); the key store tells the budget of every change. A preload
//! also warms every device's engine with the circuit (the CUDA engine's key
//! and matrices go onto its device), so a stream's first partition finds
//! them there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_filecoin::Kind;
use cuzk_kernels::groth16::ProveStartEngine;
use cuzk_kernels::KernelError;

use crate::filecoin::CircuitLoading;
use crate::keys::{KeyStore, PrepareError};

/// The parameter directory and the key store its files are loaded into.
pub struct ParamFiles {
    /// Where the `.params` files are (`params_dir`).
    pub dir: PathBuf,
    /// Holds the loaded files' prepared circuits.
    keys: Arc<KeyStore>,
    /// Loads a file as the backend's jobs would (the key store keeps
    /// whichever load comes first).
    loading: Arc<CircuitLoading>,
    /// The devices' engines, warmed with each preloaded circuit (the CUDA
    /// engine takes its key onto the device then, not in a job's first
    /// partition).
    engines: Arc<Vec<Arc<dyn ProveStartEngine>>>,
}

/// Why a file was not preloaded or evicted; each front end answers the
/// kinds differently (HTTP 404, 422, 500).
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// No `.params` file of that cache id in the parameter directory.
    #[error("no parameter file for {id:?} in {dir}")]
    NoFile {
        /// The cache id asked for.
        id: String,
        /// The parameter directory looked in.
        dir: String,
    },
    /// The cache id is no circuit of a registered proof, so there is nothing to load it as.
    #[error("{0:?} names no circuit of a registered proof")]
    NoCircuit(String),
    /// The file does not decode, or does not fit its circuit.
    #[error("loading {id}: {cause}")]
    Load {
        /// The cache id.
        id: String,
        /// Why it did not load; shared, as every caller waiting on the load gets it.
        cause: Arc<PrepareError>,
    },
    /// The thread decoding it died.
    #[error("loading {id} did not finish: {cause}")]
    Thread {
        /// The cache id.
        id: String,
        /// Its panic, or the runtime's cancel.
        cause: actix_rt::task::JoinError,
    },
    /// Loaded, but an engine could not take it (its device out of memory,
    /// or the key's file unreadable past its header).
    #[error("loading {id} onto {engine}: {cause}")]
    Warm {
        /// The cache id.
        id: String,
        /// The engine's device, as it names itself.
        engine: String,
        /// What the engine answered.
        cause: KernelError,
    },
    /// An evict of a file that is not loaded (or not in the parameter directory).
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
    /// The parameter files of `dir`, loaded through `keys` and `loading` and
    /// warmed on each of `engines`.
    pub fn new(
        dir: PathBuf,
        keys: Arc<KeyStore>,
        loading: CircuitLoading,
        engines: Vec<Arc<dyn ProveStartEngine>>,
    ) -> Self {
        Self { dir, keys, loading: Arc::new(loading), engines: Arc::new(engines) }
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
        let path = self
            .file(id)
            .ok_or_else(|| ParamsError::NoFile { id: id.to_string(), dir: self.dir.display().to_string() })?;
        let (kind, sector_size) =
            Kind::of_cache_id(id).ok_or_else(|| ParamsError::NoCircuit(id.to_string()))?;
        let already_loaded = self.keys.loaded().contains_key(id);
        let (keys, cache_id, loading) = (self.keys.clone(), id.to_string(), self.loading.clone());
        let engines = self.engines.clone();
        let loaded = actix_rt::task::spawn_blocking(move || {
            let circuit = keys
                .prepared_with(&cache_id, &path, || loading.load(&cache_id, &path, kind, sector_size, None))
                .map_err(|cause| ParamsError::Load { id: cache_id.clone(), cause })?;
            log::info!("{cache_id}: loaded in {:.1} s", started.elapsed().as_secs_f64());
            // A kind whose jobs are critical by default (WinningPoSt) is
            // warmed as urgent: the engines reserve its memory beside every
            // other circuit's.
            let urgency = crate::backend::urgency(crate::filecoin::default_priority(kind));
            for engine in engines.iter() {
                let warming = Instant::now();
                engine.warm(&circuit, urgency).map_err(|cause| ParamsError::Warm {
                    id: cache_id.clone(),
                    engine: engine.name().to_string(),
                    cause,
                })?;
                // The key read from its file onto the device is most of a
                // cold start (docs/benchmarks.md): said apart from the load.
                log::info!(
                    "{cache_id}: {} warmed in {:.1} s",
                    engine.name(),
                    warming.elapsed().as_secs_f64()
                );
            }
            // The key parts a warm pinned in host memory count in the
            // budget from now, not from the next synthesis.
            keys.resident_changed();
            Ok(circuit)
        })
        .await
        .map_err(|cause| ParamsError::Thread { id: id.to_string(), cause })??;
        Ok(Preloaded { resident_bytes: loaded.resident_bytes(), already_loaded, took: started.elapsed() })
    }

    /// Drops `id`'s loaded file and answers the bytes it held; partitions
    /// running keep it until they finish.
    pub fn evict(&self, id: &str) -> Result<u64, ParamsError> {
        let held = self.keys.loaded().get(id).copied();
        match held {
            Some(bytes) if self.file(id).is_some() && self.keys.evict(id) => Ok(bytes),
            _ => Err(ParamsError::NotLoaded(id.to_string())),
        }
    }
}
