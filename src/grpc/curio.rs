//! Curio's encodings read into the daemon's own typed submission
//! (`job_input::Submission`), the one an HTTP client's body to `/v1/jobs`
//! is read into (docs/filecoin.md), so that the job seam checks, stores and
//! restores it exactly like any other job; no JSON is written on the way:
//!
//! - PoRep: `vanilla_proof` is Curio's C1 envelope, JSON `{SectorNum,
//!   Phase1Out, SectorSize}` whose `Phase1Out` is the commit-phase-1 output
//!   as base64 (Go's encoding of `[]byte`); it is passed on as `c1_base64`
//!   untouched, and the proof type is the C1 output's own;
//! - PoSt: `vanilla_proofs` are filecoin-proofs' bincode of one sector's
//!   proof each (a WindowPoSt request is one partition, `partition_index`,
//!   and may carry fewer sectors than a full one);
//! - SnapDeals: `vanilla_proofs` are one bincode partition proof each, with
//!   the three raw 32-byte commitments;
//! - `registered_proof` in Curio's (Go abi) numbering, whose WindowPoSt
//!   V1_1 is filecoin-proofs-api's V1_2;
//! - the prover id derived from `miner_id` as Curio derives it;
//! - `sector_size` ignored, as the original daemon ignores it: the
//!   registered proof decides (Curio's cuzk-bench sends 32 GiB for every
//!   request); a size that disagrees is logged and counted.
//!
//! Lengths, field elements and the proofs themselves are checked by the
//! parser the submission goes to, not here: one set of checks for both
//! front ends.

use std::borrow::Cow;

use cuzk_actors::Priority as JobPriority;
use cuzk_filecoin::api::{RegisteredPoStProof, RegisteredUpdateProof};
use cuzk_filecoin::Kind;
use serde::Deserialize;

use super::proto::{Priority, ProofKind, SubmitProofRequest};
use crate::filecoin::{FilecoinInput, PorepInput, PostInput, RegisteredProof, UpdateInput};
use crate::job_input::{Circuit, Input, Submission};
use crate::telemetry::SectorSizeIgnored;

/// Why a request cannot become a submission. `UnknownKind` is a malformed
/// call (INVALID_ARGUMENT); the others are inputs the daemon cannot prove,
/// answered as a FAILED result, which Curio reports on the task.
#[derive(Debug, thiserror::Error)]
pub enum CurioError {
    /// `proof_kind` unset (0) or a number the protocol does not define.
    #[error("invalid proof_kind: {0}")]
    UnknownKind(i32),
    /// The PoRep C1 envelope is not the JSON Curio writes.
    #[error("vanilla_proof is not Curio's C1 envelope (JSON {{SectorNum, Phase1Out, SectorSize}}): {0}")]
    Envelope(serde_json::Error),
    /// The envelope names another sector than the request.
    #[error("the C1 envelope is for sector {envelope}, the request for sector {request}")]
    SectorMismatch {
        /// The sector number in the envelope.
        envelope: i64,
        /// The sector number in the request.
        request: u64,
    },
    /// `registered_proof` is no number Curio gives a proof of this kind.
    #[error("registered_proof {number} is not a {kind} proof in Curio's numbering (0 to 4{more})")]
    RegisteredProof {
        /// The number the request gave.
        number: u64,
        /// The kind the request is for, as the message names it.
        kind: &'static str,
        /// The rest of the message's range, where the numbering goes on past 4 (empty otherwise).
        more: &'static str,
    },
}

/// The sector sizes Curio's numbers run through, five per proof version:
/// 2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB.
const SECTOR_SIZES: [u64; 5] = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64 << 30];

/// The daemon's kind for a `proof_kind`; INVALID_ARGUMENT for 0 or an
/// unknown number, as the original daemon answers.
pub fn kind_of(proof_kind: i32) -> Result<Kind, CurioError> {
    match ProofKind::try_from(proof_kind) {
        Ok(ProofKind::PorepSealCommit) => Ok(Kind::Porep),
        Ok(ProofKind::SnapDealsUpdate) => Ok(Kind::EmptySectorUpdate),
        Ok(ProofKind::WindowPostPartition) => Ok(Kind::WindowPost),
        Ok(ProofKind::WinningPost) => Ok(Kind::WinningPost),
        Ok(ProofKind::Unspecified) | Err(_) => Err(CurioError::UnknownKind(proof_kind)),
    }
}

/// The name the original daemon gives a job's circuit in `GetStatus`' queues:
/// a kind's API name but for SnapDeals; a registered family keeps its own.
pub fn status_name(circuit: &str) -> &str {
    match Kind::from_api_name(circuit) {
        Some(Kind::EmptySectorUpdate) => "snap-update",
        _ => circuit,
    }
}

/// The request read into a submission.
pub fn submission(request: SubmitProofRequest) -> Result<Submission, CurioError> {
    let kind = kind_of(request.proof_kind)?;
    let prover_id = hex::encode(prover_id(request.miner_id));
    let input = match kind {
        Kind::Porep => {
            FilecoinInput::Porep(porep_input(&request.vanilla_proof, request.sector_number, prover_id)?)
        }
        Kind::EmptySectorUpdate => {
            let proof = registered_update(request.registered_proof)?;
            note_sector_size(&request, kind);
            FilecoinInput::Update(UpdateInput {
                registered_proof: RegisteredProof::of(proof),
                comm_r_old: hex::encode(&request.comm_r_old),
                comm_r_new: hex::encode(&request.comm_r_new),
                comm_d_new: hex::encode(&request.comm_d_new),
                vanilla_proofs: hex_all(&request.vanilla_proofs),
            })
        }
        Kind::WinningPost | Kind::WindowPost => {
            let winning = kind == Kind::WinningPost;
            let proof = registered_post(request.registered_proof, winning)?;
            note_sector_size(&request, kind);
            FilecoinInput::Post(PostInput {
                registered_proof: RegisteredProof::of(proof),
                randomness: hex::encode(&request.randomness),
                prover_id,
                vanilla_proofs: hex_all(&request.vanilla_proofs),
                // WinningPoSt has no partitions.
                partition_index: (!winning).then_some(request.partition_index as usize),
            })
        }
    };
    Ok(Submission {
        circuit: Circuit::Filecoin(kind),
        priority: priority(request.priority),
        input: Input::Filecoin(input),
        request_id: None,
        deadline_ms: None,
    })
}

/// The prover id Curio derives from a miner's actor id (Go's `toProverID`:
/// the payload of the miner's ID address, an unsigned LEB128 varint, left
/// aligned in 32 bytes).
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    let mut rest = miner_id;
    for byte in id.iter_mut() {
        *byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            break;
        }
        *byte |= 0x80;
    }
    id
}

/// The daemon's priority for a Curio priority; None (the kind's default)
/// for 0, and normal for a number the protocol does not define, as the
/// original daemon does.
fn priority(value: i32) -> Option<JobPriority> {
    match Priority::try_from(value) {
        Ok(Priority::Unspecified) => None,
        Ok(Priority::Low) => Some(JobPriority::Low),
        Ok(Priority::Normal) | Err(_) => Some(JobPriority::Normal),
        Ok(Priority::High) => Some(JobPriority::High),
        Ok(Priority::Critical) => Some(JobPriority::Critical),
    }
}

/// Curio's C1 envelope. `Phase1Out` borrows from the request's bytes (Go
/// escapes nothing base64 holds), so it is copied once, into the input.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "SectorNum")]
    sector_num: i64,
    #[serde(rename = "Phase1Out", borrow)]
    phase1_out: Cow<'a, str>,
    /// Not used: the C1 output names its own proof type, as for the
    /// original daemon.
    #[serde(rename = "SectorSize")]
    _sector_size: u64,
}

/// porep-c2's input: the envelope's C1 output, and the request's sector
/// (the envelope's when the request leaves it 0; both given must agree).
fn porep_input(envelope: &[u8], sector_number: u64, prover_id: String) -> Result<PorepInput, CurioError> {
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(CurioError::Envelope)?;
    let sector = match (sector_number, u64::try_from(envelope.sector_num)) {
        (0, Ok(from_envelope)) => from_envelope,
        (request, Ok(from_envelope)) if request == from_envelope => request,
        (request, _) => {
            return Err(CurioError::SectorMismatch { envelope: envelope.sector_num, request });
        }
    };
    Ok(PorepInput {
        c1: None,
        c1_base64: Some(envelope.phase1_out.into_owned()),
        prover_id,
        sector_id: sector,
    })
}

/// A PoSt proof in Curio's numbering: WinningPoSt V1 is 0 to 4,
/// WindowPoSt V1 5 to 9 and V1_1 10 to 14 (filecoin-proofs-api's V1_2,
/// the grindability fix, as filecoin-ffi maps it).
fn registered_post(number: u64, winning: bool) -> Result<RegisteredPoStProof, CurioError> {
    use RegisteredPoStProof as P;
    let table = match winning {
        true => [
            P::StackedDrgWinning2KiBV1,
            P::StackedDrgWinning8MiBV1,
            P::StackedDrgWinning512MiBV1,
            P::StackedDrgWinning32GiBV1,
            P::StackedDrgWinning64GiBV1,
        ]
        .get(number as usize),
        false => [
            P::StackedDrgWindow2KiBV1,
            P::StackedDrgWindow8MiBV1,
            P::StackedDrgWindow512MiBV1,
            P::StackedDrgWindow32GiBV1,
            P::StackedDrgWindow64GiBV1,
            P::StackedDrgWindow2KiBV1_2,
            P::StackedDrgWindow8MiBV1_2,
            P::StackedDrgWindow512MiBV1_2,
            P::StackedDrgWindow32GiBV1_2,
            P::StackedDrgWindow64GiBV1_2,
        ]
        .get((number as usize).wrapping_sub(5)),
    };
    table.copied().ok_or(match winning {
        true => CurioError::RegisteredProof { number, kind: "WinningPoSt", more: "" },
        false => CurioError::RegisteredProof {
            number,
            kind: "WindowPoSt",
            more: " are WinningPoSt; WindowPoSt is 5 to 14",
        },
    })
}

/// A SnapDeals proof in Curio's numbering: 0 to 4.
fn registered_update(number: u64) -> Result<RegisteredUpdateProof, CurioError> {
    use RegisteredUpdateProof as U;
    [
        U::StackedDrg2KiBV1,
        U::StackedDrg8MiBV1,
        U::StackedDrg512MiBV1,
        U::StackedDrg32GiBV1,
        U::StackedDrg64GiBV1,
    ]
    .get(number as usize)
    .copied()
    .ok_or(CurioError::RegisteredProof { number, kind: "SnapDeals", more: "" })
}

/// The registered proof's sector size, when a `sector_size` set (a PSProve
/// SnapDeals request leaves it 0) disagrees with it. Every kind's numbers
/// run through the five sizes in order, so the size is the number's place
/// among them.
fn sector_size_mismatch(given: u64, number: u64) -> Option<u64> {
    let expected = SECTOR_SIZES[(number % 5) as usize];
    (given != 0 && given != expected).then_some(expected)
}

/// Logs and counts a `sector_size` that disagrees with the request's
/// registered proof (a valid one: the caller read it first), which the
/// proof is then made for.
fn note_sector_size(request: &SubmitProofRequest, kind: Kind) {
    if let Some(expected) = sector_size_mismatch(request.sector_size, request.registered_proof) {
        SectorSizeIgnored {
            request_id: &request.request_id,
            kind,
            given: request.sector_size,
            expected,
            registered_proof: request.registered_proof,
        }
        .emit();
    }
}

fn hex_all(proofs: &[Vec<u8>]) -> Vec<String> {
    proofs.iter().map(hex::encode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `toProverID`: the ID address payload (LEB128) of the actor id.
    #[test]
    fn prover_ids_are_the_leb128_of_the_miner() {
        let mut expected = [0u8; 32];
        assert_eq!(prover_id(0), expected);
        expected[0] = 0x7f;
        assert_eq!(prover_id(127), expected);
        expected[..2].copy_from_slice(&[0xe8, 0x07]);
        assert_eq!(prover_id(1000), expected);
        expected[..3].copy_from_slice(&[0x80, 0x80, 0x01]);
        assert_eq!(prover_id(1 << 14), expected);
        let max = prover_id(u64::MAX);
        assert_eq!(&max[..10], &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(max[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn curio_numbers_name_filecoin_proofs_api_variants() {
        use RegisteredPoStProof as P;
        assert_eq!(registered_post(3, true).unwrap(), P::StackedDrgWinning32GiBV1);
        assert_eq!(registered_post(8, false).unwrap(), P::StackedDrgWindow32GiBV1);
        assert_eq!(registered_post(13, false).unwrap(), P::StackedDrgWindow32GiBV1_2);
        assert_eq!(registered_post(10, false).unwrap(), P::StackedDrgWindow2KiBV1_2);
        for (number, winning) in [(5, true), (4, false), (15, false), (u64::MAX, false)] {
            assert!(registered_post(number, winning).is_err(), "{number} {winning}");
        }
        assert_eq!(registered_update(3).unwrap(), RegisteredUpdateProof::StackedDrg32GiBV1);
        assert!(registered_update(5).is_err());
        assert_eq!(sector_size_mismatch(0, 13), None);
        assert_eq!(sector_size_mismatch(32 << 30, 13), None);
        assert_eq!(sector_size_mismatch(64 << 30, 13), Some(32 << 30));
        assert_eq!(sector_size_mismatch(32 << 30, 0), Some(2 << 10));
    }

    #[test]
    fn kinds_and_priorities() {
        assert!(matches!(kind_of(0), Err(CurioError::UnknownKind(0))));
        assert!(matches!(kind_of(9), Err(CurioError::UnknownKind(9))));
        assert_eq!(kind_of(3).unwrap(), Kind::WindowPost);
        assert_eq!(priority(0), None);
        assert_eq!(priority(4), Some(JobPriority::Critical));
        assert_eq!(priority(99), Some(JobPriority::Normal));
        assert_eq!(status_name("snap-prove"), "snap-update");
        assert_eq!(status_name("porep-c2"), "porep-c2");
        assert_eq!(status_name("mimc-chain"), "mimc-chain");
    }

    /// The input of a submission, which the gRPC front end builds Filecoin's.
    fn filecoin_input(submission: &Submission) -> &FilecoinInput {
        match &submission.input {
            Input::Filecoin(input) => input,
            Input::Family(_) => panic!("Curio's jobs are Filecoin's"),
        }
    }

    fn request(kind: ProofKind) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: "wdpost-1000-0-[12 34 56 78 9 10 11 12]".into(),
            proof_kind: kind as i32,
            miner_id: 1000,
            ..SubmitProofRequest::default()
        }
    }

    #[test]
    fn a_porep_envelope_becomes_c1_base64_for_its_sector() {
        let mut porep = request(ProofKind::PorepSealCommit);
        porep.vanilla_proof = br#"{"SectorNum":7,"Phase1Out":"eyJhIjoxfQ==","SectorSize":2048}"#.to_vec();
        let submitted = submission(porep.clone()).unwrap();
        assert_eq!(submitted.circuit, Circuit::Filecoin(Kind::Porep));
        let FilecoinInput::Porep(input) = filecoin_input(&submitted) else { panic!("a PoRep input") };
        assert_eq!(input.c1_base64.as_deref(), Some("eyJhIjoxfQ=="));
        assert_eq!(input.c1, None);
        assert_eq!(input.sector_id, 7);
        assert_eq!(input.prover_id, hex::encode(prover_id(1000)));
        assert_eq!(submitted.priority, None, "the kind's default");
        porep.sector_number = 7;
        assert!(submission(porep.clone()).is_ok());
        porep.sector_number = 8;
        assert!(matches!(
            submission(porep.clone()),
            Err(CurioError::SectorMismatch { envelope: 7, request: 8 })
        ));
        porep.vanilla_proof = b"{\"SectorNum\":7}".to_vec();
        assert!(matches!(submission(porep), Err(CurioError::Envelope(_))));
    }

    #[test]
    fn a_window_post_partition_keeps_its_index_and_raw_bytes_become_hex() {
        let mut window = request(ProofKind::WindowPostPartition);
        window.registered_proof = 10;
        window.priority = Priority::High as i32;
        window.partition_index = 1;
        window.randomness = vec![0xab; 32];
        window.vanilla_proofs = vec![vec![1, 2], vec![3]];
        let submitted = submission(window).unwrap();
        assert_eq!(submitted.priority, Some(JobPriority::High));
        let FilecoinInput::Post(input) = filecoin_input(&submitted) else { panic!("a PoSt input") };
        assert_eq!(
            input.registered_proof,
            RegisteredProof::of(RegisteredPoStProof::StackedDrgWindow2KiBV1_2)
        );
        assert_eq!(input.partition_index, Some(1));
        assert_eq!(input.randomness, "ab".repeat(32));
        assert_eq!(input.vanilla_proofs, ["0102", "03"]);
        // Its stored text, as the JSON body the front end once wrote for it.
        assert_eq!(
            submitted.text(),
            format!(
                r#"{{"circuit":"window-post","input":{{"partition_index":1,"prover_id":"{}","randomness":"{}","registered_proof":"StackedDrgWindow2KiBV1_2","vanilla_proofs":["0102","03"]}},"priority":"high"}}"#,
                hex::encode(prover_id(1000)),
                "ab".repeat(32)
            )
        );
        let mut winning = request(ProofKind::WinningPost);
        winning.registered_proof = 0;
        winning.partition_index = 3;
        // What Curio's cuzk-bench sends: 32 GiB whatever the proof.
        winning.sector_size = 32 << 30;
        let winning = submission(winning).unwrap();
        let FilecoinInput::Post(input) = filecoin_input(&winning) else { panic!("a PoSt input") };
        assert_eq!(input.partition_index, None, "WinningPoSt has no partitions");
        assert_eq!(
            input.registered_proof,
            RegisteredProof::of(RegisteredPoStProof::StackedDrgWinning2KiBV1),
            "the registered proof decides the size"
        );
    }
}
