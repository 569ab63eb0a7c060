//! The values-only PoRep witness (`cuzk_filecoin::witness`, compiled
//! evaluation's default for PoRep) against the reference circuit: for every
//! partition of a 2 KiB sector sealed by filecoin-proofs-api, the assignment
//! equals, value for value, the one the reference `StackedCircuit` records
//! in assignment mode (`Evaluation::CompiledReference`). Any allocation out
//! of order, missing or extra shifts every later value, so this fails on the
//! first one.

use cuzk_filecoin::fixtures::{self, PROVER_ID};
use cuzk_filecoin::porep::PorepRequest;
use cuzk_filecoin::record::{Evaluation, Recorded};
use cuzk_filecoin::{Error, ProofRequest};

fn assignment(recorded: Result<Recorded, Error>) -> (Vec<ark_bls12_381::Fr>, usize) {
    match recorded {
        Ok(Recorded::Assignment { values, num_inputs }) => (values, num_inputs),
        Ok(Recorded::Witness(_)) => panic!("compiled evaluation records an assignment"),
        Err(e) => panic!("recording failed: {e}"),
    }
}

#[test]
fn fast_porep_assignment_equals_the_reference_circuits() {
    let sector = fixtures::seal(27).unwrap();
    let request = PorepRequest { c1: sector.c1, prover_id: PROVER_ID, sector_id: u64::from(sector.id) };
    let partitions = request.partition_count().unwrap();
    assert!(partitions >= 1);
    for k in 0..partitions {
        let (fast, fast_inputs) = assignment(request.record_partition(k, Evaluation::Compiled));
        let (reference, reference_inputs) =
            assignment(request.record_partition(k, Evaluation::CompiledReference));
        assert_eq!(fast_inputs, reference_inputs, "partition {k}: inputs");
        if let Some(i) = fast.iter().zip(&reference).position(|(x, y)| x != y) {
            let (part, index) =
                if i < reference_inputs { ("input", i) } else { ("aux", i - reference_inputs) };
            panic!(
                "partition {k}: {part} {index} is {} where the reference has {} ({} values in all)",
                fast[i],
                reference[i],
                reference.len()
            );
        }
        assert_eq!(fast.len(), reference.len(), "partition {k}: values");
    }
}
