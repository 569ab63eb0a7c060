//! What the commands read from the files and flags they are given: JSON,
//! and a Filecoin kind's input in either of its forms.

use std::path::{Path, PathBuf};

use cuzk_filecoin::Kind;
use serde_json::{json, Value};

use super::CliError;

/// A Filecoin kind's input from the command line: porep-c2's from its
/// flags, any kind's from an `--input` JSON file.
pub(super) fn filecoin_input(
    kind: Kind,
    c1: Option<PathBuf>,
    prover_id: Option<String>,
    sector_id: Option<u64>,
    input: Option<PathBuf>,
) -> Result<Value, CliError> {
    match (c1, input) {
        (Some(c1), None) => Ok(json!({
            "c1": read_json(&c1)?,
            "prover_id": prover_id.ok_or(CliError::Usage("--c1 needs --prover-id"))?,
            "sector_id": sector_id.ok_or(CliError::Usage("--c1 needs --sector-id"))?,
        })),
        (None, Some(path)) => read_json(&path),
        _ => Err(CliError::NoFilecoinInput { kind }),
    }
}

/// A JSON file, or an error naming it.
pub(super) fn read_json(path: &Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    parse_json(&path.display().to_string(), &text)
}

/// `text` as JSON; `what` names the file or flag it came from.
pub(super) fn parse_json(what: &str, text: &str) -> Result<Value, CliError> {
    serde_json::from_str(text).map_err(|source| CliError::Json { what: what.to_string(), source })
}
