//! The columns a C1 output opens: every challenged node's and every parent's
//! label at each layer of SDR.
//!
//! A challenged node's labels are SDR's own: storage-proofs-porep's sealing
//! functions `create_label` (layer 1: the base DRG parents from the same
//! layer) and `create_label_exp` (later layers: the base parents from the same
//! layer, the expander parents from the previous one) compute them, with the
//! graph's own parent function and hash. A parent that is not challenged has
//! random labels: a verifier sees them only through its column's hash and
//! that hash's path in tree C, as it would see a sealed sector's.
//!
//! The sealing functions read parents' labels from layer buffers indexed by
//! node, a sector's size each. The buffers here are anonymous mappings that
//! reserve no memory (`MAP_NORESERVE`, no transparent huge pages): only the
//! pages of the nodes written are ever backed, a few thousand at 32 GiB.

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::{Domain, Hasher};
use memmap2::{MmapMut, MmapOptions};
use rand::RngCore;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_porep::stacked::create_label::single::{create_label, create_label_exp};
use storage_proofs_porep::stacked::{Column, StackedBucketGraph, TOTAL_PARENTS};

use super::Error;

/// Bytes of a node (a label, a digest).
const NODE: usize = 32;

/// Labels per node: the challenged nodes and their parents.
pub struct Columns<H: Hasher> {
    /// Each node's labels, layer 1 first.
    rows: BTreeMap<u32, Vec<H::Domain>>,
}

/// A layer's labels, addressed by node as SDR's sealing functions address
/// them; untouched pages stay unbacked.
struct LayerBuffer(MmapMut);

impl LayerBuffer {
    fn new(bytes: usize) -> Result<Self, Error> {
        let mapped = MmapOptions::new()
            .len(bytes)
            .no_reserve_swap()
            .map_anon()
            .map_err(|source| Error::LayerBuffer { bytes, source })?;
        // A huge page per touched node would back gigabytes.
        #[cfg(target_os = "linux")]
        mapped.advise(memmap2::Advice::NoHugePage).map_err(|source| Error::LayerBuffer { bytes, source })?;
        Ok(LayerBuffer(mapped))
    }

    fn put<D: Domain>(&mut self, node: u32, label: &D) {
        let at = node as usize * NODE;
        self.0[at..at + NODE].copy_from_slice(label.as_ref());
    }

    fn get<D: Domain>(&self, node: u32) -> Result<D, Error> {
        let at = node as usize * NODE;
        D::try_from_bytes(&self.0[at..at + NODE]).map_err(super::filecoin)
    }
}

impl<H: Hasher> Columns<H> {
    /// Labels `challenged` nodes as SDR does for `replica_id` over `layers`
    /// layers of `graph`, after giving each of their parents random labels
    /// drawn from `rng` (in node order).
    pub fn label<R: RngCore>(
        graph: &StackedBucketGraph<H>,
        replica_id: &H::Domain,
        layers: usize,
        challenged: &BTreeSet<u32>,
        rng: &mut R,
    ) -> Result<Self, Error> {
        let mut parents = vec![0u32; graph.degree()];
        let mut nodes = challenged.clone();
        for &node in challenged {
            graph.parents(node as usize, &mut parents).map_err(super::filecoin)?;
            nodes.extend(&parents);
        }
        // Every node starts random; the challenged ones are overwritten below.
        let mut rows: BTreeMap<u32, Vec<H::Domain>> = nodes
            .into_iter()
            .map(|node| (node, (0..layers).map(|_| H::Domain::random(rng)).collect()))
            .collect();
        let bytes = graph.size() * NODE;
        let (mut current, mut previous) = (LayerBuffer::new(bytes)?, LayerBuffer::new(bytes)?);
        for layer in 1..=layers {
            for (&node, labels) in &rows {
                current.put(node, &labels[layer - 1]);
                if layer > 1 {
                    previous.put(node, &labels[layer - 2]);
                }
            }
            // Ascending: a node's base parents are earlier nodes, so a
            // challenged base parent is labelled before it is read.
            for &node in challenged {
                let labelled = if layer == 1 {
                    create_label(graph, None, replica_id, &mut current.0, layer, node as usize)
                } else {
                    create_label_exp(
                        graph,
                        None,
                        replica_id,
                        &previous.0,
                        &mut current.0,
                        layer,
                        node as usize,
                    )
                };
                labelled.map_err(super::filecoin)?;
                let label = current.get(node)?;
                rows.get_mut(&node).expect("every challenged node has a column")[layer - 1] = label;
            }
        }
        Ok(Columns { rows })
    }

    /// `node`'s labels, layer 1 first (`None` for a node never labelled).
    pub fn rows(&self, node: u32) -> Option<&[H::Domain]> {
        self.rows.get(&node).map(Vec::as_slice)
    }

    /// Every column's hash (storage-proofs' `Column::hash`, the Poseidon
    /// hash of its labels), by node: tree C's known leaves.
    pub fn hashes(&self) -> Result<BTreeMap<u64, H::Domain>, Error> {
        self.rows
            .iter()
            .map(|(&node, labels)| {
                let column = Column::<H>::new(node, labels.clone()).map_err(super::filecoin)?;
                Ok((u64::from(node), column.hash().into()))
            })
            .collect()
    }

    /// The parent labels SDR hashes for a node at `layer`, as the prover's
    /// labeling and encoding proofs list them: the base parents' labels
    /// from this layer, then (after layer 1) the expander parents' from the
    /// previous one, repeated in order to `TOTAL_PARENTS`. `parents` is the
    /// graph's list for the node, its first `base` entries the base parents.
    pub fn parent_labels(&self, parents: &[u32], base: usize, layer: usize) -> Result<Vec<H::Domain>, Error> {
        let used = if layer == 1 { &parents[..base] } else { parents };
        let labels = used
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let row = if i < base { layer - 1 } else { layer - 2 };
                self.rows(*node)
                    .map(|labels| labels[row])
                    .ok_or(Error::Inconsistent("a parent without a column"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(labels.iter().cycle().take(TOTAL_PARENTS).copied().collect())
    }
}
