//! PreloadSRS and EvictSRS: a Filecoin parameter file loaded before its
//! first job, or dropped (`crate::param_files`, as HTTP's `/v1/params`).
//! A circuit id is the daemon's own (the parameter file's cache id, as
//! `GET /v1/params` lists it) or the original daemon's short form,
//! `<kind>-<size>`: kind `porep`, `winning`, `wpost` or `snap`, size `2k`,
//! `8m`, `512m`, `32g` or `64g` (`porep-32g`, `wpost-32g`, ...).

use cuzk_filecoin::Kind;
use tonic::Status;

use super::error::params_status;
use super::proto::{EvictSrsResponse, PreloadSrsResponse};
use super::state::GrpcState;
use crate::param_files::ParamsError;

/// Loads the file unless it is loaded; `load_time_ms` is this call's time.
pub async fn preload(state: &GrpcState, circuit_id: &str) -> Result<PreloadSrsResponse, Status> {
    let preloaded = state.params.preload(&cache_id(circuit_id)).await.map_err(params_status)?;
    Ok(PreloadSrsResponse {
        already_loaded: preloaded.already_loaded,
        load_time_ms: preloaded.took.as_millis() as u64,
    })
}

/// Drops the file's loaded circuit; a file not loaded is no error
/// (`was_loaded` false), as for the original daemon.
pub fn evict(state: &GrpcState, circuit_id: &str) -> Result<EvictSrsResponse, Status> {
    match state.params.evict(&cache_id(circuit_id)) {
        Ok(freed_bytes) => Ok(EvictSrsResponse { was_loaded: true, freed_bytes }),
        Err(ParamsError::NotLoaded(_)) => Ok(EvictSrsResponse { was_loaded: false, freed_bytes: 0 }),
        Err(error) => Err(params_status(error)),
    }
}

/// The parameter file's cache id a circuit id names: the original
/// daemon's short form translated, any other taken as a cache id.
fn cache_id(circuit_id: &str) -> String {
    short_form(circuit_id).unwrap_or_else(|| circuit_id.to_string())
}

fn short_form(circuit_id: &str) -> Option<String> {
    let (kind, size) = circuit_id.split_once('-')?;
    let kind = match kind {
        "porep" => Kind::Porep,
        "winning" => Kind::WinningPost,
        "wpost" => Kind::WindowPost,
        "snap" => Kind::EmptySectorUpdate,
        _ => return None,
    };
    let size: u64 = match size {
        "2k" => 2 << 10,
        "8m" => 8 << 20,
        "512m" => 512 << 20,
        "32g" => 32 << 30,
        "64g" => 64 << 30,
        _ => return None,
    };
    kind.cache_id(size).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_short_ids_name_cache_ids() {
        assert_eq!(cache_id("porep-32g"), Kind::Porep.cache_id(32 << 30).unwrap());
        assert_eq!(cache_id("wpost-2k"), Kind::WindowPost.cache_id(2048).unwrap());
        assert_eq!(cache_id("winning-2k"), Kind::WinningPost.cache_id(2048).unwrap());
        assert_eq!(cache_id("snap-64g"), Kind::EmptySectorUpdate.cache_id(64 << 30).unwrap());
        let own = Kind::Porep.cache_id(2048).unwrap();
        assert_eq!(cache_id(&own), own);
        assert_eq!(cache_id("porep-4k"), "porep-4k");
    }
}
