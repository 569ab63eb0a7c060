//! Partitions as leased work on PostgreSQL (src/store/leases.rs), against
//! the throwaway cluster of scripts/pg-test-cluster.sh: claims in priority
//! and age order, never one partition to two nodes; a renewed lease holds,
//! one that runs out returns its partition to the queue with the attempt
//! counted, and the node that lost it learns so and cannot record its result
//! (the job store of a fleet node, store/pg.rs, checks the lease).

use crate::common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{proof, record, PgSchema};
use cuzk::fleet::{queue_partitions, Claim, Leases, LeasesError};
use cuzk::store::PgJobStore;
use cuzk_actors::store::{JobStore, StoreWrite};
use cuzk_actors::{JobId, PartitionKey, Priority, Stage};

/// Stores jobs (id, seq, priority, partitions) and queues their partitions.
fn queued(schema: &PgSchema, jobs: &[(&str, u64, Priority, u32)]) {
    let store = PgJobStore::connect(&schema.url, None).unwrap();
    let mut client = schema.client();
    for &(id, seq, priority, partitions) in jobs {
        let record = cuzk_actors::store::JobRecord { priority, partitions, ..record(id, seq) };
        store.write(StoreWrite::Accepted(record.clone())).wait_blocking().unwrap();
        queue_partitions(&mut client, &record).unwrap();
    }
    store.close().unwrap();
}

/// Records a proof of partition 0 of `job` as the job store of fleet node
/// `node` does; whether it was recorded, as that node's.
fn proved_as(schema: &PgSchema, node: &str, job: &str) -> bool {
    let store = PgJobStore::connect(&schema.url, Some(node)).unwrap();
    let write =
        StoreWrite::PartitionProved { job: JobId(job.into()), index: 0, proof: proof(1), detail: None };
    store.write(write).wait_blocking().unwrap();
    store.close().unwrap();
    let row = schema
        .client()
        .query_opt("SELECT node FROM cuzk_partitions WHERE job = $1 AND partition_index = 0", &[&job])
        .unwrap();
    row.is_some_and(|row| row.get::<_, Option<String>>(0).as_deref() == Some(node))
}

fn at(claims: &[Claim]) -> Vec<(String, u32, u32)> {
    claims.iter().map(|c| (c.job.0.clone(), c.index, c.attempt)).collect()
}

#[test]
fn postgres_claims_follow_priority_then_age_and_never_overlap() {
    let Some(schema) = PgSchema::create("postgres_claims_follow_priority_then_age_and_never_overlap") else {
        return;
    };
    let lease = Duration::from_secs(60);
    let mut a = Leases::connect(&schema.url, "node-a", lease).unwrap();
    queued(
        &schema,
        &[
            ("old-normal", 1, Priority::Normal, 2),
            ("new-high", 2, Priority::High, 2),
            ("older-low", 0, Priority::Low, 1),
        ],
    );
    let s = |id: &str, index, attempt| (id.to_string(), index, attempt);
    assert_eq!(
        at(&a.claim(3, &[]).unwrap()),
        [s("new-high", 0, 1), s("new-high", 1, 1), s("old-normal", 0, 1)]
    );
    // Queuing again changes nothing: a held partition stays held.
    let again =
        cuzk_actors::store::JobRecord { priority: Priority::High, partitions: 2, ..record("new-high", 2) };
    queue_partitions(&mut schema.client(), &again).unwrap();
    assert_eq!(at(&a.claim(10, &[]).unwrap()), [s("old-normal", 1, 1), s("older-low", 0, 1)]);
    assert!(a.claim(10, &[]).unwrap().is_empty(), "everything is held");

    // Four nodes claiming 300 partitions at once, a few at a time: each
    // partition goes to exactly one of them.
    queued(&schema, &[("big", 3, Priority::Normal, 300)]);
    let claimed: Vec<Claim> = std::thread::scope(|scope| {
        let nodes: Vec<_> = (0..4)
            .map(|n| {
                let url = &schema.url;
                scope.spawn(move || {
                    let mut node = Leases::connect(url, &format!("node-{n}"), lease).unwrap();
                    let mut mine = Vec::new();
                    loop {
                        let got = node.claim(7, &[]).unwrap();
                        if got.is_empty() {
                            return mine;
                        }
                        mine.extend(got);
                    }
                })
            })
            .collect();
        nodes.into_iter().flat_map(|node| node.join().unwrap()).collect()
    });
    let distinct: HashSet<u32> = claimed.iter().map(|c| c.index).collect();
    assert_eq!(claimed.len(), 300, "no partition claimed twice");
    assert_eq!(distinct.len(), 300, "every partition claimed");
    assert!(claimed.iter().all(|c| c.job.0 == "big" && c.attempt == 1));
}

#[test]
fn postgres_leases_renew_expire_and_return_to_the_queue_with_the_attempt_counted() {
    let Some(schema) = PgSchema::create("postgres_leases_renew_expire_and_return_to_the_queue") else {
        return;
    };
    // The leases' ends are the database's clock, which a test cannot move:
    // each check falls a whole second or more from the end it is about, so
    // that a slow round trip on a busy machine cannot put it on the other
    // side.
    let lease = Duration::from_millis(4000);
    let renewed_after = Duration::from_millis(2000);
    let mut a = Leases::connect(&schema.url, "node-a", lease).unwrap();
    let mut b = Leases::connect(&schema.url, "node-b", lease).unwrap();
    queued(&schema, &[("x", 1, Priority::Normal, 1)]);
    let x = (PartitionKey { job: JobId("x".into()), index: 0 }, Stage::Proving);

    let claimed = Instant::now();
    assert_eq!(at(&a.claim(1, &[]).unwrap()), [("x".to_string(), 0, 1)]);
    // Renewed before it runs out, the lease outlives its first end.
    std::thread::sleep(renewed_after);
    assert!(a.renew(std::slice::from_ref(&x)).unwrap().is_empty(), "still held");
    // Halfway between the first lease's end and the renewed one's.
    std::thread::sleep((lease + renewed_after / 2).saturating_sub(claimed.elapsed()));
    assert!(b.claim(1, &[]).unwrap().is_empty(), "a renewed lease holds past the first one's end");
    assert!(!proved_as(&schema, "node-b", "x"), "only the owner records a partition's result");

    // Not renewed (node a stalled or died): the partition returns to the
    // queue, and the next claim is its second attempt.
    std::thread::sleep(lease + Duration::from_millis(300));
    assert_eq!(at(&b.claim(1, &[]).unwrap()), [("x".to_string(), 0, 2)]);
    assert_eq!(
        a.renew(std::slice::from_ref(&x)).unwrap(),
        std::slice::from_ref(&x.0),
        "node a learns it lost x"
    );
    assert!(!proved_as(&schema, "node-a", "x"), "and cannot record its result");
    assert!(proved_as(&schema, "node-b", "x"));
    assert!(b.claim(1, &[]).unwrap().is_empty(), "a finished partition is out of the queue");
    assert_eq!(b.renew(std::slice::from_ref(&x)).unwrap(), [x.0], "and held by no one");
}

#[test]
fn postgres_leases_refuse_a_nameless_node_or_an_empty_lease() {
    let Some(schema) = PgSchema::create("postgres_leases_refuse_a_nameless_node_or_an_empty_lease") else {
        return;
    };
    let refused = |node: &str, lease| match Leases::connect(&schema.url, node, lease) {
        Ok(_) => panic!("{node:?} with {lease:?} was accepted"),
        Err(error) => error,
    };
    let nameless = refused("", Duration::from_secs(30));
    assert!(matches!(nameless, LeasesError::Nameless) && nameless.to_string().contains("needs a name"));
    let empty = refused("node-a", Duration::ZERO);
    assert!(matches!(empty, LeasesError::BadLease(_)), "{empty}");
    assert!(empty.to_string().contains("not a positive number of milliseconds"));
}
