//! PoRep's assignment without bellperson's SHA-256 gadget: the values the
//! reference circuit allocates, in its order, several times cheaper and
//! with a partition's challenges in parallel. Compiled evaluation needs only
//! the assignment (the constraints are the circuit's compiled matrices),
//! and in PoRep's circuit nearly every variable is a bit of an SDR label's
//! or tree D's SHA-256, which the gadget builds linear combinations for
//! that a values-only recording discards.
//!
//! | module | what |
//! | --- | --- |
//! | `bits` | the light bit and 32-bit word, with the gadgets' allocation rules |
//! | `sha256` | SHA-256 over them, allocating as bellperson's gadget does |
//! | `poseidon` | Poseidon over field values, allocating as neptune's circuit does |
//! | `vanilla` | a challenge's vanilla proof opened into the circuit's values |
//! | `challenge` | one challenge's assignment (the reference `Proof::synthesize`, mirrored) |
//! | `partition` | a partition: the prefix once, the challenges in parallel, joined in order |

pub mod bits;
pub mod challenge;
pub mod partition;
pub mod poseidon;
pub mod sha256;
pub mod vanilla;

pub use partition::record_partition;
