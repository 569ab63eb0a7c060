//! Proving keys and matrices per circuit shape: set up on first use,
//! persisted under the data directory, reloaded on later starts; and
//! Filecoin's keys, read from their parameter files on first use.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ark_groth16::{ProvingKey, VerifyingKey};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use cuzk_kernels::circuits::{CircuitFamily, CircuitShape, WitnessSource};
use cuzk_kernels::groth16::PreparedCircuit;
use cuzk_kernels::Bls12_381;
use rand::SeedableRng;

type Slot = Arc<OnceLock<Result<Arc<PreparedCircuit>, String>>>;

/// The key cache. Its lock is held only to find a shape's slot; setup and
/// loading run outside it, and concurrent users of one shape wait on that
/// shape's slot alone.
pub struct CircuitStore {
    dir: PathBuf,
    slots: Mutex<HashMap<String, Slot>>,
}

impl CircuitStore {
    pub fn open(data_dir: &Path) -> Result<Self, String> {
        let dir = data_dir.join("keys");
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Self {
            dir,
            slots: Mutex::new(HashMap::new()),
        })
    }

    fn slot(&self, circuit_id: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(circuit_id.to_string()).or_default().clone()
    }

    /// The prepared circuit for a shape, loading or setting it up if needed.
    pub fn prepared(
        &self,
        family: &dyn CircuitFamily,
        shape: &CircuitShape,
    ) -> Result<Arc<PreparedCircuit>, String> {
        self.prepared_with(&shape.circuit_id, || self.load_or_setup(family, shape))
    }

    /// The prepared circuit `circuit_id`, built by `build` on first use (a
    /// Filecoin parameter file, read where the operator keeps it). A failure
    /// is kept: every later job of the circuit fails the same way.
    pub fn prepared_with(
        &self,
        circuit_id: &str,
        build: impl FnOnce() -> Result<PreparedCircuit, String>,
    ) -> Result<Arc<PreparedCircuit>, String> {
        self.slot(circuit_id)
            .get_or_init(|| build().map(Arc::new))
            .clone()
    }

    /// The verifying key of a shape already set up (in memory or on disk).
    /// Looking up never adds a slot (ids come from clients) and never leaves
    /// the key directory.
    pub fn verifying_key(&self, circuit_id: &str) -> Option<VerifyingKey<Bls12_381>> {
        let id_chars = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if circuit_id.is_empty() || !circuit_id.chars().all(id_chars) {
            return None;
        }
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.get(circuit_id).cloned()
        };
        if let Some(Ok(prepared)) = slot.as_ref().and_then(|s| s.get()) {
            return Some(prepared.pk.vk.clone());
        }
        let bytes = fs::read(self.vk_path(circuit_id)).ok()?;
        VerifyingKey::deserialize_compressed(&bytes[..]).ok()
    }

    /// Host bytes of every prepared shape (keys and matrices).
    pub fn resident_bytes(&self) -> u64 {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .values()
            .filter_map(|slot| match slot.get() {
                Some(Ok(prepared)) => Some(prepared.resident_bytes()),
                _ => None,
            })
            .sum()
    }

    /// Circuits prepared and held now, with their resident bytes.
    pub fn loaded(&self) -> BTreeMap<String, u64> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .filter_map(|(id, slot)| match slot.get() {
                Some(Ok(prepared)) => Some((id.clone(), prepared.resident_bytes())),
                _ => None,
            })
            .collect()
    }

    /// Forgets a prepared circuit (or a failed attempt to prepare it): its
    /// memory is freed once the partitions using it finish, and the next job
    /// prepares it again. Whether there was anything to forget.
    pub fn evict(&self, circuit_id: &str) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.remove(circuit_id).is_some()
    }

    /// circuit ids with a key on disk or in memory.
    pub fn known_shapes(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".vk")
                    .map(str::to_string)
            })
            .collect();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        ids.extend(
            slots
                .iter()
                .filter(|(_, s)| matches!(s.get(), Some(Ok(_))))
                .map(|(id, _)| id.clone()),
        );
        ids
    }

    fn pk_path(&self, circuit_id: &str) -> PathBuf {
        self.dir.join(format!("{circuit_id}.pk"))
    }

    fn vk_path(&self, circuit_id: &str) -> PathBuf {
        self.dir.join(format!("{circuit_id}.vk"))
    }

    fn load_or_setup(
        &self,
        family: &dyn CircuitFamily,
        shape: &CircuitShape,
    ) -> Result<PreparedCircuit, String> {
        let instance = || {
            family
                .instance(shape, &WitnessSource::Seed(0))
                .expect("a seed always yields an instance")
        };
        let id = &shape.circuit_id;
        if let Ok(bytes) = fs::read(self.pk_path(id)) {
            // Our own file, written atomically: skip the subgroup checks that
            // would make loading a large key slow.
            match ProvingKey::<Bls12_381>::deserialize_uncompressed_unchecked(&bytes[..]) {
                Ok(pk) => match PreparedCircuit::from_key(id, pk, instance()) {
                    Ok(prepared) => {
                        log::info!("loaded proving key for {id}");
                        return Ok(prepared);
                    }
                    Err(e) => log::warn!(
                        "stored key for {id} does not fit the circuit ({e}); setting up again"
                    ),
                },
                Err(e) => log::warn!("stored key for {id} is unreadable ({e}); setting up again"),
            }
        }
        log::info!("circuit-specific setup for {id}");
        let started = std::time::Instant::now();
        let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
        let prepared = PreparedCircuit::setup(id, instance, &mut rng).map_err(|e| e.to_string())?;
        self.persist(&prepared)?;
        log::info!(
            "setup for {id} took {:.2}s",
            started.elapsed().as_secs_f64()
        );
        Ok(prepared)
    }

    fn persist(&self, prepared: &PreparedCircuit) -> Result<(), String> {
        let id = &prepared.circuit_id;
        let mut pk = Vec::new();
        prepared
            .pk
            .serialize_uncompressed(&mut pk)
            .map_err(|e| e.to_string())?;
        let mut vk = Vec::new();
        prepared
            .pk
            .vk
            .serialize_compressed(&mut vk)
            .map_err(|e| e.to_string())?;
        write_atomically(&self.pk_path(id), &pk)?;
        write_atomically(&self.vk_path(id), &vk)
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes)
        .and_then(|_| fs::File::open(&tmp)?.sync_all())
        .and_then(|_| fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
