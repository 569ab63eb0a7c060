//! The four Filecoin circuits the daemon proves, how filecoin-proofs names their
//! parameter files, and their blank circuits (for the setup), all obtained from
//! filecoin-proofs and the storage-proofs crates themselves so names and shapes
//! cannot drift from what filecoin-proofs reads.

use std::fmt;
use std::str::FromStr;

use filecoin_proofs::constants::{
    DefaultPieceHasher, SECTOR_SIZE_2_KIB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_512_MIB,
    SECTOR_SIZE_64_GIB, SECTOR_SIZE_8_MIB,
};
use filecoin_proofs::parameters::{
    public_params, window_post_public_params, winning_post_public_params,
};
use filecoin_proofs::types::{PoRepConfig, PoStConfig};
use filecoin_proofs::with_shape;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{
    CacheEntryMetadata, CacheableParameters, ParameterSetMetadata,
};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
};

use crate::record::{record_counts, record_shape, Shape};
use crate::Error;

/// A Filecoin circuit family; one parameter file per kind and sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// PoRep commit phase 2 (every seal proof version of a size shares it).
    Porep,
    WinningPost,
    WindowPost,
    /// SnapDeals (empty-sector update).
    EmptySectorUpdate,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Porep,
        Kind::WinningPost,
        Kind::WindowPost,
        Kind::EmptySectorUpdate,
    ];

    /// The name the CLI and the docs use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Porep => "porep",
            Kind::WinningPost => "winning",
            Kind::WindowPost => "window",
            Kind::EmptySectorUpdate => "snap",
        }
    }

    /// The registered proof whose circuit this kind is at `sector_size`: the
    /// current version of each (seal V1_1, WindowPoSt V1_2), which shares its
    /// circuit with the other versions of the same size.
    pub fn registered_proof(self, sector_size: u64) -> Result<RegisteredProof, Error> {
        use RegisteredPoStProof as P;
        use RegisteredSealProof as S;
        use RegisteredUpdateProof as U;
        let index = [
            SECTOR_SIZE_2_KIB,
            SECTOR_SIZE_8_MIB,
            SECTOR_SIZE_512_MIB,
            SECTOR_SIZE_32_GIB,
            SECTOR_SIZE_64_GIB,
        ]
        .iter()
        .position(|&s| s == sector_size)
        .ok_or(Error::UnsupportedSectorSize(sector_size))?;
        Ok(match self {
            Kind::Porep => RegisteredProof::Seal(
                [
                    S::StackedDrg2KiBV1_1,
                    S::StackedDrg8MiBV1_1,
                    S::StackedDrg512MiBV1_1,
                    S::StackedDrg32GiBV1_1,
                    S::StackedDrg64GiBV1_1,
                ][index],
            ),
            Kind::WinningPost => RegisteredProof::PoSt(
                [
                    P::StackedDrgWinning2KiBV1,
                    P::StackedDrgWinning8MiBV1,
                    P::StackedDrgWinning512MiBV1,
                    P::StackedDrgWinning32GiBV1,
                    P::StackedDrgWinning64GiBV1,
                ][index],
            ),
            Kind::WindowPost => RegisteredProof::PoSt(
                [
                    P::StackedDrgWindow2KiBV1_2,
                    P::StackedDrgWindow8MiBV1_2,
                    P::StackedDrgWindow512MiBV1_2,
                    P::StackedDrgWindow32GiBV1_2,
                    P::StackedDrgWindow64GiBV1_2,
                ][index],
            ),
            Kind::EmptySectorUpdate => RegisteredProof::Update(
                [
                    U::StackedDrg2KiBV1,
                    U::StackedDrg8MiBV1,
                    U::StackedDrg512MiBV1,
                    U::StackedDrg32GiBV1,
                    U::StackedDrg64GiBV1,
                ][index],
            ),
        })
    }

    /// The cache identifier filecoin-proofs computes for this circuit (the
    /// parameter files are `v28-<id>.params` and so on).
    pub fn cache_id(self, sector_size: u64) -> Result<String, Error> {
        self.registered_proof(sector_size)?.circuit_identifier()
    }

    /// The kind and sector size whose parameter files `cache_id` names, if
    /// any registered proof's does.
    pub fn of_cache_id(cache_id: &str) -> Option<(Kind, u64)> {
        Kind::ALL
            .into_iter()
            .flat_map(|kind| SECTOR_SIZES.iter().map(move |&(_, size)| (kind, size)))
            .find(|&(kind, size)| kind.cache_id(size).is_ok_and(|id| id == cache_id))
    }

    /// Synthesizes the blank circuit and records its R1CS, with the cache
    /// identifier and `.meta` contents filecoin-proofs derives from the same
    /// public parameters.
    pub fn blank(self, sector_size: u64) -> Result<Blank, Error> {
        self.blank_recorded(sector_size, Rows::Keep)
    }

    /// The blank circuit counted (constraints, variables, densities)
    /// without keeping its rows: the shape of circuits too large to record,
    /// such as 32 GiB PoRep's 130 million constraints.
    pub fn blank_counts(self, sector_size: u64) -> Result<Blank, Error> {
        self.blank_recorded(sector_size, Rows::Count)
    }

    fn blank_recorded(self, sector_size: u64, rows: Rows) -> Result<Blank, Error> {
        match self.registered_proof(sector_size)? {
            RegisteredProof::Seal(p) => {
                let config = p.as_v1_config();
                with_shape!(sector_size, blank_porep, &config, rows)
            }
            RegisteredProof::PoSt(p) => {
                let config = p.as_v1_config();
                let window = self == Kind::WindowPost;
                with_shape!(sector_size, blank_post, &config, window, rows)
            }
            RegisteredProof::Update(_) => with_shape!(sector_size, blank_update, sector_size, rows),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kind {s:?}; expected porep, winning, window or snap"))
    }
}

/// The sector sizes filecoin-proofs registers, by the names operators write
/// (`2KiB`, `32GiB`); a plain byte count is accepted too.
const SECTOR_SIZES: [(&str, u64); 5] = [
    ("2KiB", SECTOR_SIZE_2_KIB),
    ("8MiB", SECTOR_SIZE_8_MIB),
    ("512MiB", SECTOR_SIZE_512_MIB),
    ("32GiB", SECTOR_SIZE_32_GIB),
    ("64GiB", SECTOR_SIZE_64_GIB),
];

/// Reads a sector size given as `2KiB` (any case) or as bytes; only the
/// sizes filecoin-proofs registers are accepted, so a typo fails here
/// rather than after a long setup.
pub fn parse_sector_size(text: &str) -> Result<u64, String> {
    let named = SECTOR_SIZES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text.trim()))
        .map(|&(_, bytes)| bytes);
    let size = named.or_else(|| text.trim().parse().ok());
    size.filter(|s| SECTOR_SIZES.iter().any(|&(_, bytes)| bytes == *s))
        .ok_or_else(|| {
            let names: Vec<&str> = SECTOR_SIZES.iter().map(|(name, _)| *name).collect();
            format!("unknown sector size {text:?}; expected one of {}", names.join(", "))
        })
}

/// One of filecoin-proofs-api's registered proof enums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisteredProof {
    Seal(RegisteredSealProof),
    PoSt(RegisteredPoStProof),
    Update(RegisteredUpdateProof),
}

impl RegisteredProof {
    /// The circuit kind (which `.params` file) and the sector size.
    pub fn kind_and_sector_size(self) -> (Kind, u64) {
        match self {
            RegisteredProof::Seal(p) => (Kind::Porep, u64::from(p.sector_size())),
            RegisteredProof::PoSt(p) => {
                let kind = match p.typ() {
                    filecoin_proofs_api::PoStType::Winning => Kind::WinningPost,
                    filecoin_proofs_api::PoStType::Window => Kind::WindowPost,
                };
                (kind, u64::from(p.sector_size()))
            }
            RegisteredProof::Update(p) => (Kind::EmptySectorUpdate, u64::from(p.sector_size())),
        }
    }

    /// The cache identifier filecoin-proofs names this proof's parameter files by.
    pub fn circuit_identifier(self) -> Result<String, Error> {
        match self {
            RegisteredProof::Seal(p) => p.circuit_identifier().map_err(filecoin),
            RegisteredProof::PoSt(p) => p.circuit_identifier().map_err(filecoin),
            // filecoin-proofs-api 19.1's RegisteredUpdateProof::circuit_identifier
            // names the PoRep circuit; filecoin-proofs' update prover reads the
            // update compound's own file, named here as it names it.
            RegisteredProof::Update(p) => {
                let sector_size = u64::from(p.sector_size());
                Ok(with_shape!(sector_size, update_cache_id, sector_size))
            }
        }
    }
}

/// A blank circuit recorded for the setup.
pub struct Blank {
    /// filecoin-proofs' cache identifier for the circuit.
    pub cache_id: String,
    /// What filecoin-proofs writes to the `.meta` file.
    pub meta: CacheEntryMetadata,
    /// The R1CS and densities the setup works from.
    pub shape: Shape,
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

/// Whether a blank circuit's rows are kept or only counted.
#[derive(Clone, Copy)]
enum Rows {
    Keep,
    Count,
}

/// The blank circuit recorded, named by `Compound`'s own cache identifier.
fn blank_of<Compound, C, P>(pp: &P, circuit: C, rows: Rows) -> Result<Blank, Error>
where
    Compound: CacheableParameters<C, P>,
    C: bellperson::Circuit<blstrs::Scalar>,
    P: ParameterSetMetadata,
{
    Ok(Blank {
        cache_id: Compound::cache_identifier(pp),
        meta: Compound::cache_meta(pp),
        shape: match rows {
            Rows::Keep => record_shape(circuit)?,
            Rows::Count => record_counts(circuit)?,
        },
    })
}

fn blank_porep<Tree: 'static + MerkleTreeTrait>(config: &PoRepConfig, rows: Rows) -> Result<Blank, Error> {
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let pp = public_params::<Tree>(config).map_err(filecoin)?;
    let circuit = <Compound<Tree> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        StackedCircuit<Tree, DefaultPieceHasher>,
    >>::blank_circuit(&pp);
    blank_of::<Compound<Tree>, _, _>(&pp, circuit, rows)
}

fn blank_post<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    window: bool,
    rows: Rows,
) -> Result<Blank, Error> {
    let pp = if window {
        window_post_public_params::<Tree>(config)
    } else {
        winning_post_public_params::<Tree>(config)
    }
    .map_err(filecoin)?;
    let circuit = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp);
    blank_of::<FallbackPoStCompound<Tree>, _, _>(&pp, circuit, rows)
}

fn update_cache_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(sector_size: u64) -> String {
    let pp = storage_proofs_update::PublicParams::from_sector_size(sector_size);
    <EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(&pp)
}

fn blank_update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_size: u64,
    rows: Rows,
) -> Result<Blank, Error> {
    let pp = storage_proofs_update::PublicParams::from_sector_size(sector_size);
    let circuit = <EmptySectorUpdateCompound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::blank_circuit(&pp);
    blank_of::<EmptySectorUpdateCompound<Tree>, _, _>(&pp, circuit, rows)
}

#[cfg(test)]
mod sector_size_tests {
    use super::*;

    #[test]
    fn sector_sizes_by_name_or_bytes() {
        assert_eq!(parse_sector_size("2KiB"), Ok(2048));
        assert_eq!(parse_sector_size("32gib"), Ok(32 << 30));
        assert_eq!(parse_sector_size("2048"), Ok(2048));
        assert!(parse_sector_size("4KiB").unwrap_err().contains("2KiB, 8MiB"));
        assert!(parse_sector_size("4096").is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind names its own file: filecoin-proofs-api's update proof
    /// names the PoRep circuit, and reading that file for an update fails
    /// only once a partition is proved.
    #[test]
    fn every_kind_has_its_own_cache_id() {
        let ids: Vec<String> = Kind::ALL.iter().map(|k| k.cache_id(2048).unwrap()).collect();
        for (i, id) in ids.iter().enumerate() {
            assert!(!ids[..i].contains(id), "{id} named twice");
        }
        // Cheap enough here (90,883 constraints); the tests' generated files
        // check the other kinds the same way.
        assert_eq!(ids[1], Kind::WinningPost.blank(2048).unwrap().cache_id);
        for (kind, id) in Kind::ALL.into_iter().zip(&ids) {
            assert_eq!(Kind::of_cache_id(id), Some((kind, 2048)));
        }
        assert_eq!(Kind::of_cache_id("stacked-proof-of-nothing"), None);
    }
}
