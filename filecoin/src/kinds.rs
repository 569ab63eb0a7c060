//! The four Filecoin proof kinds the daemon proves, the names clients and
//! operators give them, how filecoin-proofs names their parameter files, and
//! their blank circuits (for the setup), all obtained from filecoin-proofs and
//! the storage-proofs crates themselves so names and shapes cannot drift from
//! what filecoin-proofs reads.
//!
//! A request's kind (what a client puts in `"circuit"`) and a circuit family
//! (which `.params` file) are one type, [`Kind`]: they map one to one. PoRep
//! commit phase 2 proves the stacked-DRG circuit and nothing else proves it;
//! each PoSt kind has its own fallback-PoSt parameters; SnapDeals proves the
//! update circuit. Two types would only add a conversion with no case to
//! decide. A kind has two names: the API's (`porep-c2`, what filecoin-proofs'
//! call produces) and the CLI's (`porep`, the circuit), and parses from both.

use std::str::FromStr;

use filecoin_proofs::constants::{
    DefaultPieceHasher, SECTOR_SIZE_2_KIB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_512_MIB, SECTOR_SIZE_64_GIB,
    SECTOR_SIZE_8_MIB,
};
use filecoin_proofs::parameters::{public_params, window_post_public_params, winning_post_public_params};
use filecoin_proofs::types::{PoRepConfig, PoStConfig};
use filecoin_proofs::with_shape;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use serde::de::DeserializeOwned;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{CacheEntryMetadata, CacheableParameters, ParameterSetMetadata};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound};

use crate::record::{record_counts, record_shape, Shape};
use crate::Error;

/// A Filecoin proof kind: what a client asks for, and the circuit family
/// (one parameter file per kind and sector size) that proves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// PoRep commit phase 2 (every seal proof version of a size shares it).
    Porep,
    /// WinningPoSt: one partition over the challenged sectors of an elected
    /// miner.
    WinningPost,
    /// WindowPoSt: a deadline's sectors, in partitions.
    WindowPost,
    /// SnapDeals (empty-sector update).
    EmptySectorUpdate,
}

/// What a late proof of a kind costs its storage provider, by the chain's
/// rules: what a prover weighs when the client gives no priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lateness {
    /// WinningPoSt: the block and its reward; the proof is due within the
    /// epoch (30 s) the miner was elected in.
    BlockReward,
    /// WindowPoSt: the deadline's sectors are declared faulty and lose their
    /// power; the proof is due within the deadline's 30 minutes.
    Power,
    /// PoRep and SnapDeals: the sector's activation waits, and the chain
    /// allows far longer than a proof takes.
    Delay,
}

impl Kind {
    /// Every kind, in the order the daemon lists them.
    pub const ALL: [Kind; 4] = [Kind::Porep, Kind::WinningPost, Kind::WindowPost, Kind::EmptySectorUpdate];

    /// The name clients give in a job's `"circuit"` (docs/api.md): the call
    /// whose proof the job returns.
    pub fn api_name(self) -> &'static str {
        match self {
            Kind::Porep => "porep-c2",
            Kind::WinningPost => "winning-post",
            Kind::WindowPost => "window-post",
            Kind::EmptySectorUpdate => "snap-prove",
        }
    }

    /// The name operators give on the command line (`params generate
    /// --kinds`, the benchmarks): the circuit.
    pub fn cli_name(self) -> &'static str {
        match self {
            Kind::Porep => "porep",
            Kind::WinningPost => "winning",
            Kind::WindowPost => "window",
            Kind::EmptySectorUpdate => "snap",
        }
    }

    /// The kind a job's `"circuit"` names, if it names one (else it may name
    /// a registered circuit family).
    pub fn from_api_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.api_name() == name)
    }

    /// What a late proof of this kind costs.
    pub fn lateness(self) -> Lateness {
        match self {
            Kind::WinningPost => Lateness::BlockReward,
            Kind::WindowPost => Lateness::Power,
            Kind::Porep | Kind::EmptySectorUpdate => Lateness::Delay,
        }
    }

    /// Refuses a registered proof of another kind, such as a WindowPoSt
    /// proof in a `winning-post` job: the PoSt kinds share their input's
    /// form, so only the proof tells them apart.
    pub fn admit(self, proof: RegisteredProof) -> Result<(), Error> {
        let (actual, _) = proof.kind_and_sector_size();
        if actual == self {
            return Ok(());
        }
        Err(Error::Invalid(format!(
            "{} is a {} proof, not {}",
            proof.name(),
            actual.api_name(),
            self.api_name()
        )))
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

/// A kind by either of its names (`porep` or `porep-c2`).
impl FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL.into_iter().find(|k| k.cli_name() == s || k.api_name() == s).ok_or_else(|| {
            let names: Vec<String> =
                Kind::ALL.iter().map(|k| format!("{} ({})", k.cli_name(), k.api_name())).collect();
            Error::UnknownKind { name: s.to_string(), expected: names.join(", ") }
        })
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
pub fn parse_sector_size(text: &str) -> Result<u64, Error> {
    let named =
        SECTOR_SIZES.iter().find(|(name, _)| name.eq_ignore_ascii_case(text.trim())).map(|&(_, bytes)| bytes);
    let size = named.or_else(|| text.trim().parse().ok());
    size.filter(|s| SECTOR_SIZES.iter().any(|&(_, bytes)| bytes == *s)).ok_or_else(|| {
        let names: Vec<&str> = SECTOR_SIZES.iter().map(|(name, _)| *name).collect();
        Error::UnknownSectorSize { name: text.to_string(), expected: names.join(", ") }
    })
}

/// A registered proof of one of filecoin-proofs-api's enums (`P`) from its
/// variant's name as a client gives it (`"StackedDrgWinning2KiBV1"`).
pub fn parse_registered_proof<P: DeserializeOwned>(name: &serde_json::Value) -> Result<P, Error> {
    serde_json::from_value(name.clone())
        .map_err(|source| Error::UnknownProof { name: name.to_string(), source })
}

/// One of filecoin-proofs-api's registered proof enums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisteredProof {
    /// A seal proof: PoRep.
    Seal(RegisteredSealProof),
    /// A PoSt proof: WinningPoSt or WindowPoSt.
    PoSt(RegisteredPoStProof),
    /// An update proof: SnapDeals.
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

    /// The enum variant's name, as clients give it.
    pub fn name(self) -> String {
        match self {
            RegisteredProof::Seal(p) => format!("{p:?}"),
            RegisteredProof::PoSt(p) => format!("{p:?}"),
            RegisteredProof::Update(p) => format!("{p:?}"),
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
        assert_eq!(parse_sector_size("2KiB").unwrap(), 2048);
        assert_eq!(parse_sector_size("32gib").unwrap(), 32 << 30);
        assert_eq!(parse_sector_size("2048").unwrap(), 2048);
        let unknown = parse_sector_size("4KiB").unwrap_err();
        assert!(matches!(unknown, Error::UnknownSectorSize { .. }), "{unknown:?}");
        assert!(unknown.to_string().contains("2KiB, 8MiB"), "{unknown}");
        assert!(parse_sector_size("4096").is_err());
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    /// Each kind parses from both of its names and from nothing else; the
    /// eight names are distinct, so no name is ambiguous.
    #[test]
    fn kinds_parse_from_their_api_and_cli_names() {
        let mut names = Vec::new();
        for kind in Kind::ALL {
            assert_eq!(kind.api_name().parse::<Kind>().unwrap(), kind);
            assert_eq!(kind.cli_name().parse::<Kind>().unwrap(), kind);
            assert_eq!(Kind::from_api_name(kind.api_name()), Some(kind));
            assert_eq!(Kind::from_api_name(kind.cli_name()), None, "a job names the API kind");
            names.extend([kind.api_name(), kind.cli_name()]);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 8);
        let unknown = "mimc-chain".parse::<Kind>().unwrap_err();
        assert!(unknown.to_string().contains("porep (porep-c2), winning (winning-post)"), "{unknown}");
    }

    /// A PoSt proof is admitted only by its own kind; the refusal names both.
    #[test]
    fn a_kind_admits_only_its_own_registered_proofs() {
        let winning = RegisteredProof::PoSt(RegisteredPoStProof::StackedDrgWinning2KiBV1);
        Kind::WinningPost.admit(winning).unwrap();
        let refused = Kind::WindowPost.admit(winning).unwrap_err().to_string();
        assert!(
            refused.contains("StackedDrgWinning2KiBV1 is a winning-post proof, not window-post"),
            "{refused}"
        );
        let seal = RegisteredProof::Seal(RegisteredSealProof::StackedDrg32GiBV1_1);
        assert!(Kind::EmptySectorUpdate.admit(seal).is_err());
        assert_eq!(
            parse_registered_proof::<RegisteredPoStProof>(&serde_json::json!("StackedDrgWindow2KiBV1_2"))
                .unwrap(),
            RegisteredPoStProof::StackedDrgWindow2KiBV1_2
        );
        let unknown = parse_registered_proof::<RegisteredPoStProof>(&serde_json::json!(7)).unwrap_err();
        assert!(unknown.to_string().starts_with("registered_proof 7 is not one"), "{unknown}");
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
