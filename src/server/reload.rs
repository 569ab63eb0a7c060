//! Reloading the tokens on SIGHUP, for `cuzk serve`: the config file's
//! `[auth]` and the token file read again, and a new gate put in force.

use actix_web::web;

use crate::auth::{AuthConfig, AuthError, Gates};
use crate::config::{Config, ConfigError};

/// Why a reload on SIGHUP left the old gate in force.
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    /// The config file, whose `[auth]` is read again.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The tokens or tenants read.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The thread that reads the files.
    #[error("the reload thread failed: {0}")]
    Thread(#[from] actix_rt::task::JoinError),
}

/// On each SIGHUP, reads the tokens and tenants again (the config file's
/// `[auth]`, the token file; the environment's tokens as read at start) and
/// puts a new gate in force; requests already admitted finish under the
/// old one. A reload that fails leaves the old gate in force.
pub(super) fn reload_tokens_on_sighup(
    gates: web::Data<Gates>,
    auth: AuthConfig,
    listen: String,
) -> std::io::Result<()> {
    use crate::telemetry::{TenantsConfigured, TokensReloaded};
    let mut hangup = actix_rt::signal::unix::signal(actix_rt::signal::unix::SignalKind::hangup())?;
    actix_rt::spawn(async move {
        while hangup.recv().await.is_some() {
            let (sources, insecure) = (auth.sources.clone(), auth.insecure);
            // Files are read off the server's threads.
            let reread = actix_rt::task::spawn_blocking(move || {
                let mut auth = match &sources.config_file {
                    Some(path) => Config::load(path)?.auth,
                    None => AuthConfig::default(),
                };
                (auth.sources, auth.insecure) = (sources, insecure);
                auth.add_source_tokens()?;
                Ok::<_, ReloadError>(auth)
            })
            .await
            .unwrap_or_else(|e| Err(e.into()));
            match reread.and_then(|mut auth| Ok(gates.replace(&mut auth, &listen)?)) {
                Ok(gate) => {
                    TenantsConfigured { tenants: &gate.tenant_names() }.emit();
                    TokensReloaded { outcome: Ok(gate.token_count()) }.emit();
                }
                Err(error) => TokensReloaded { outcome: Err(&error) }.emit(),
            }
        }
    });
    Ok(())
}
