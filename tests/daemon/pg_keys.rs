//! Proving keys shared by a fleet through PostgreSQL (src/store/keys_pg.rs,
//! src/keys.rs), against the throwaway cluster of scripts/pg-test-cluster.sh.
//! Each node is a key store with a data directory of its own on one schema:
//! nodes that need a shape at once do one setup and prove with one key; a
//! node whose own key differs takes the fleet's; a node that proved alone
//! before joining publishes its key; a database that fails fails the
//! partition retryably and is asked again. Below them, the chunked table:
//! a key of several chunks comes back whole, a damaged one is refused, the
//! first publication stands, and a shape's lock is held by one at a time.

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::PgSchema;
use cuzk::keys::{KeyError, KeyStore, Preparation, SharedKeyError, SharedKeys};
use cuzk_actors::Abandonment;
use cuzk_kernels::circuits::mimc_chain::MimcChain;
use cuzk_kernels::circuits::{CircuitFamily, CircuitInstance, CircuitShape, InputError, WitnessSource};
use cuzk_kernels::groth16::PreparedCircuit;
use serde_json::{json, Value};

/// `mimc-chain`, counting the instances it builds: a setup builds two (one
/// for the key, one for the matrices), loading a key one.
#[derive(Default)]
struct Counted {
    instances: AtomicUsize,
}

impl CircuitFamily for Counted {
    fn name(&self) -> &str {
        MimcChain.name()
    }
    fn describe(&self) -> Value {
        MimcChain.describe()
    }
    fn shape(&self, params: &Value) -> Result<CircuitShape, InputError> {
        MimcChain.shape(params)
    }
    fn instance(
        &self,
        shape: &CircuitShape,
        source: &WitnessSource,
    ) -> Result<Box<dyn CircuitInstance>, InputError> {
        self.instances.fetch_add(1, Ordering::SeqCst);
        MimcChain.instance(shape, source)
    }
}

fn family() -> (Arc<Counted>, Arc<dyn CircuitFamily>, CircuitShape) {
    let counted = Arc::new(Counted::default());
    let shape = counted.shape(&json!({"log2_constraints": 4})).unwrap();
    (counted.clone(), counted, shape)
}

/// The shape's key as the store prepares it for a partition.
fn prepare(
    store: &Arc<KeyStore>,
    family: &Arc<dyn CircuitFamily>,
    shape: &CircuitShape,
) -> Arc<PreparedCircuit> {
    let started = Instant::now();
    loop {
        match store.prepared(family, shape, &Abandonment::default()).unwrap() {
            Preparation::Ready(circuit) => return circuit,
            Preparation::Pending => {
                assert!(started.elapsed() < Duration::from_secs(120), "{} never got ready", shape.circuit_id);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn node(schema: &PgSchema, dir: &Path) -> Arc<KeyStore> {
    Arc::new(KeyStore::open_shared(dir, &schema.url).unwrap())
}

fn file(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join("keys").join(name)).unwrap()
}

/// The published key's rows: (circuit id, vk, chunks).
fn published(schema: &PgSchema) -> Vec<(String, Vec<u8>, i32)> {
    schema
        .client()
        .query("SELECT circuit_id, vk, chunks FROM cuzk_keys", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

fn vk_bytes(circuit: &PreparedCircuit) -> Vec<u8> {
    let mut bytes = Vec::new();
    ark_serialize::CanonicalSerialize::serialize_compressed(&circuit.pk.vk, &mut bytes).unwrap();
    bytes
}

#[test]
fn postgres_nodes_needing_a_shape_at_once_set_it_up_once() {
    let Some(schema) = PgSchema::create("postgres_nodes_needing_a_shape_at_once_set_it_up_once") else {
        return;
    };
    let (counted, family, shape) = family();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (node(&schema, dir_a.path()), node(&schema, dir_b.path()));
    let [key_a, key_b] = std::thread::scope(|scope| {
        [&a, &b].map(|store| scope.spawn(|| prepare(store, &family, &shape))).map(|t| t.join().unwrap())
    });
    // One setup (two instances) and one load of its key (one), not two setups.
    assert_eq!(counted.instances.load(Ordering::SeqCst), 3, "exactly one node set the shape up");
    let rows = published(&schema);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, shape.circuit_id);
    assert_eq!(rows[0].2, 1, "a 16-constraint key is one chunk");
    assert_eq!(vk_bytes(&key_a), rows[0].1);
    assert_eq!(vk_bytes(&key_b), rows[0].1);
    let pk = format!("{}.pk", shape.circuit_id);
    let vk = format!("{}.vk", shape.circuit_id);
    assert_eq!(file(dir_a.path(), &pk), file(dir_b.path(), &pk), "both nodes hold the same proving key");
    assert_eq!(file(dir_a.path(), &vk), rows[0].1);
    assert_eq!(file(dir_b.path(), &vk), rows[0].1);
    assert_eq!(a.verifying_key(&shape.circuit_id), b.verifying_key(&shape.circuit_id));
    assert_eq!(a.verifying_key(&shape.circuit_id), Some(key_a.pk.vk.clone()));
}

#[test]
fn postgres_a_node_whose_own_key_differs_takes_the_fleets() {
    let Some(schema) = PgSchema::create("postgres_a_node_whose_own_key_differs_takes_the_fleets") else {
        return;
    };
    let (_, family, shape) = family();
    let (fleet_dir, own_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A node that proved alone has a key of its own; the fleet has another.
    let own = prepare(&Arc::new(KeyStore::open(own_dir.path()).unwrap()), &family, &shape);
    let fleet = prepare(&node(&schema, fleet_dir.path()), &family, &shape);
    assert_ne!(vk_bytes(&own), vk_bytes(&fleet), "two setups make two keys");

    let joined = node(&schema, own_dir.path());
    // Before it prepares the shape, it already serves the fleet's key, not
    // the one in its own files.
    assert_eq!(joined.verifying_key(&shape.circuit_id), Some(fleet.pk.vk.clone()));
    let key = prepare(&joined, &family, &shape);
    assert_eq!(vk_bytes(&key), vk_bytes(&fleet));
    let pk = format!("{}.pk", shape.circuit_id);
    assert_eq!(file(own_dir.path(), &pk), file(fleet_dir.path(), &pk), "its key file was replaced");
    assert_eq!(file(own_dir.path(), &format!("{}.vk", shape.circuit_id)), vk_bytes(&fleet));
    assert_eq!(published(&schema).len(), 1);
}

#[test]
fn postgres_a_node_that_proved_alone_publishes_its_key_to_an_empty_fleet() {
    let Some(schema) = PgSchema::create("postgres_a_node_that_proved_alone_publishes_its_key") else {
        return;
    };
    let (counted, family, shape) = family();
    let (own_dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let own = prepare(&Arc::new(KeyStore::open(own_dir.path()).unwrap()), &family, &shape);
    let pk = format!("{}.pk", shape.circuit_id);
    let own_pk = file(own_dir.path(), &pk);

    let before = counted.instances.load(Ordering::SeqCst);
    let joined = prepare(&node(&schema, own_dir.path()), &family, &shape);
    assert_eq!(counted.instances.load(Ordering::SeqCst) - before, 1, "its key was loaded, not set up again");
    assert_eq!(vk_bytes(&joined), vk_bytes(&own));
    assert_eq!(file(own_dir.path(), &pk), own_pk);
    assert_eq!(published(&schema), [(shape.circuit_id.clone(), vk_bytes(&own), 1)]);

    // The next node takes it.
    let other = prepare(&node(&schema, other_dir.path()), &family, &shape);
    assert_eq!(vk_bytes(&other), vk_bytes(&own));
    assert_eq!(file(other_dir.path(), &pk), own_pk);
}

#[test]
fn postgres_a_failing_key_store_fails_the_partition_retryably_and_is_asked_again() {
    let Some(schema) = PgSchema::create("postgres_a_failing_key_store_fails_the_partition_retryably") else {
        return;
    };
    let (_, family, shape) = family();
    let dir = tempfile::tempdir().unwrap();
    let store = node(&schema, dir.path());
    schema.client().batch_execute("DROP TABLE cuzk_key_chunks, cuzk_keys").unwrap();
    let started = Instant::now();
    let error = loop {
        match store.prepared(&family, &shape, &Abandonment::default()) {
            Ok(Preparation::Pending) => std::thread::sleep(Duration::from_millis(10)),
            Ok(Preparation::Ready(_)) => panic!("prepared without the fleet's key store"),
            Err(e) => break e,
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the failure was never answered");
    };
    assert!(matches!(error, KeyError::Unavailable(_)), "{error:?}");
    assert!(
        error.to_string().contains("the fleet's key store") && error.to_string().contains("cuzk_keys"),
        "{error}"
    );
    // The database is back: the shape's next partition prepares again.
    schema.client().batch_execute(include_str!("../../migrations/0004_keys.sql")).unwrap();
    let key = prepare(&store, &family, &shape);
    assert_eq!(published(&schema), [(shape.circuit_id.clone(), vk_bytes(&key), 1)]);
}

#[test]
fn postgres_chunked_keys_come_back_whole_and_the_first_publication_stands() {
    let Some(schema) = PgSchema::create("postgres_chunked_keys_come_back_whole") else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    // Two chunks of 16 MiB and a partial third.
    let bytes: Vec<u8> = (0..(40u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(path("big.pk"), &bytes).unwrap();
    let shared = SharedKeys::connect(&schema.url).unwrap();
    let mut lock = shared.lock("big").unwrap();
    assert_eq!(lock.key().unwrap(), None);
    assert_eq!(lock.publish(&path("big.pk"), b"vk").unwrap(), None, "the first publication is stored");
    let key = lock.key().unwrap().unwrap();
    assert_eq!((key.vk.as_slice(), key.pk_bytes), (&b"vk"[..], bytes.len() as u64));
    let chunks: i64 = schema.client().query_one("SELECT count(*) FROM cuzk_key_chunks", &[]).unwrap().get(0);
    assert_eq!(chunks, 3);
    lock.download(&key, &path("copy.pk")).unwrap();
    assert!(std::fs::read(path("copy.pk")).unwrap() == bytes, "the download is the published file");

    std::fs::write(path("other.pk"), b"another key").unwrap();
    assert_eq!(lock.publish(&path("other.pk"), b"other vk").unwrap(), Some(key.clone()), "the first stands");

    // A damaged chunk: the download fails and leaves the local file as it was.
    schema
        .client()
        .execute(
            "UPDATE cuzk_key_chunks SET bytes = set_byte(bytes, 4, 255 - get_byte(bytes, 4)) WHERE n = 1",
            &[],
        )
        .unwrap();
    std::fs::write(path("copy.pk"), b"as it was").unwrap();
    let error = lock.download(&key, &path("copy.pk")).unwrap_err();
    assert!(matches!(error, SharedKeyError::Mismatch { .. }), "{error}");
    assert!(error.to_string().contains("length or SHA-256 differs from the published"), "{error}");
    assert_eq!(std::fs::read(path("copy.pk")).unwrap(), b"as it was");
    assert!(!path("copy.tmp").exists());
}

#[test]
fn postgres_a_shapes_lock_is_held_by_one_node_at_a_time() {
    let Some(schema) = PgSchema::create("postgres_a_shapes_lock_is_held_by_one_node_at_a_time") else {
        return;
    };
    let (first, second) =
        (SharedKeys::connect(&schema.url).unwrap(), SharedKeys::connect(&schema.url).unwrap());
    let held = first.lock("shape").unwrap();
    // Another shape's lock is free meanwhile.
    drop(second.lock("another-shape").unwrap());
    let (locked, got) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let lock = second.lock("shape").unwrap();
            locked.send(Instant::now()).unwrap();
            drop(lock);
        });
        assert!(got.recv_timeout(Duration::from_millis(500)).is_err(), "the lock is held");
        let released = Instant::now();
        drop(held);
        assert!(got.recv_timeout(Duration::from_secs(10)).unwrap() >= released);
    });
}
