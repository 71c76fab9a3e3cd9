//! The parts of the running proxy that a reload brings up to date, each one [`Reload`]: the
//! proxy (its `Live` state, `[access]`, the pacer, the CA and the signer), the TLS listener,
//! the robots.txt cache, the key directory's signer, the audit log, the log filter and the
//! disclosure. The reloader prepares every part, then applies every part, in one loop
//! ([`super::Reloader`]); each [`Applier`] of the typed list of reloadable keys
//! (`config::RELOADABLE`) is one of them, and a part missing for one fails every debug build
//! at start ([`covers_every_applier`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::cache::RobotsCache;
use crate::config::{self, Applier, Config};
use crate::disclosure::Disclosure;
use crate::proxy::{LiveParts, Proxy};
use crate::signing::Signer;
use crate::tls::ca::CertificateAuthority;
use crate::tls::listener::ListenerTls;

use super::{ReloadReport, UsersReport};

/// What every part of a reload is prepared from.
pub(super) struct Reloading<'a> {
    /// What asked for the reload, as the logs name it.
    pub(super) who: &'static str,
    /// The configuration to apply.
    pub(super) new: &'a Config,
    /// What a reload applies of it (the values of restart-only keys as running), for the
    /// disclosure and the audit log's settings.
    pub(super) in_force: &'a Config,
    /// The configuration the process started with.
    pub(super) started: &'a Config,
    /// The reloadable keys whose values (or files) changed.
    pub(super) changed: &'a [String],
    /// `RUST_LOG`, which wins over `log.level`.
    pub(super) rust_log: Option<&'a str>,
    /// The signer built for `new`, shared by the proxy and the key directory.
    pub(super) signer: Option<Arc<Signer>>,
    /// The interception CA for `new`.
    pub(super) ca: Option<Arc<CertificateAuthority>>,
}

/// Why a part cannot be prepared: the reload is refused, naming the key.
pub(super) struct Refused {
    pub(super) key: &'static str,
    pub(super) message: String,
}

impl Refused {
    fn new(key: &'static str, error: &dyn std::fmt::Display) -> Self {
        Refused { key, message: error.to_string() }
    }
}

/// What puts a prepared part in force; it cannot refuse the reload (it logs what fails), and
/// may say what it did in the report.
pub(super) type Apply<'a> =
    Box<dyn FnOnce(&mut ReloadReport) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> + Send + 'a>;

/// One part of the running proxy that a reload brings up to date.
pub(super) trait Reload: Sync {
    /// The appliers of `config::RELOADABLE` it is.
    fn appliers(&self) -> &'static [Applier];

    /// Builds and checks, from `r`, everything it will need; an error refuses the reload
    /// before any part applied anything.
    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused>;
}

fn done<'a>() -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(std::future::ready(()))
}

impl Reload for Proxy {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::Live, Applier::Access, Applier::Pacer, Applier::Ca, Applier::Signer]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        let parts = LiveParts { ca: r.ca.clone(), signer: r.signer.clone() };
        let prepared =
            self.prepare_reload(r.new, parts).map_err(|e| Refused::new("access.users_file", &e))?;
        Ok(Box::new(move |report| {
            let reloaded = self.apply_reload(r.new, prepared);
            if let Some(file) = reloaded.users_file {
                report.users_file = file.map(|file| UsersReport {
                    file: file.display().to_string(),
                    reloaded: true,
                    error: None,
                });
            }
            done()
        }))
    }
}

/// The TLS listener's certificate, key and client verification, when `proxy.tls_listen` is on.
impl Reload for Option<ListenerTls> {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::ListenerTls]
    }

    /// Read again when the report says its certificate, key or client verification changed
    /// (a key, or a file on disk); `tls_listen` itself needs a restart: the listener that
    /// runs is the one started with.
    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        let changed =
            r.changed.iter().any(|c| config::applied_by(Applier::ListenerTls).any(|k| k == c));
        let (Some(in_force), true) = (self, changed) else { return Ok(Box::new(|_| done())) };
        let Some(files) = crate::preflight::listener_files(r.new) else {
            return Ok(Box::new(|_| done()));
        };
        let tls = crate::tls::listener::listener_config(files)
            .map_err(|e| Refused::new("proxy.tls_certificate", &e))?;
        Ok(Box::new(move |_| {
            in_force.store(tls);
            tracing::info!("{}: the TLS listener's certificate, key and client CA reloaded", r.who);
            done()
        }))
    }
}

impl Reload for RobotsCache {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::RobotsCache]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        Ok(Box::new(move |_| {
            self.reconfigure(&r.new.robots);
            done()
        }))
    }
}

/// The key directory's signer (`signing.directory_listen`), replaced with the proxy's.
impl Reload for Option<Arc<arc_swap::ArcSwap<Signer>>> {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::Signer]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        Ok(Box::new(move |_| {
            if let (Some(directory), Some(signer)) = (self, &r.signer) {
                directory.store(signer.clone());
            }
            done()
        }))
    }
}

impl Reload for crate::audit::AuditLog {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::AuditLog]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        Ok(Box::new(move |_| {
            Box::pin(async move {
                if let Err(e) = self.reconfigure(&r.new.audit).await {
                    tracing::error!(error = %e, "{}: cannot apply the audit options", r.who);
                }
                // A `proxy_reconfigured` record when what the log names of the configuration
                // changed.
                if let Err(e) = self.record_settings(r.in_force.logged_settings()).await {
                    let who = r.who;
                    tracing::error!(error = %e, "{who}: cannot queue the proxy_reconfigured audit record");
                }
            })
        }))
    }
}

/// The process's log filter (`log.level`; `RUST_LOG` wins).
pub(super) struct LogFilter;

impl Reload for LogFilter {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::LogFilter]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        crate::logging::filter(&r.new.log, r.rust_log)
            .map_err(|e| Refused::new("log.level", &e))?;
        Ok(Box::new(move |_| {
            if let Err(e) = crate::logging::set_filter(&r.new.log, r.rust_log) {
                tracing::error!(error = %e, "{}: cannot apply log.level", r.who);
            }
            done()
        }))
    }
}

/// What is disclosed follows what is in force: the new values of the keys a reload applies,
/// the running ones of the others (`robots.max_redirects`, …) until a restart; it is kept
/// under the state_dir the process started with (a restart key).
impl Reload for Disclosure {
    fn appliers(&self) -> &'static [Applier] {
        &[Applier::Disclosure]
    }

    fn prepare<'a>(&'a self, r: &'a Reloading<'a>) -> Result<Apply<'a>, Refused> {
        Ok(Box::new(move |_| {
            let inputs = r.in_force.disclosure_inputs();
            let now = std::time::SystemTime::now();
            if let Err(e) = self.update(&inputs, &r.started.state_dir, now) {
                tracing::error!(error = %e, "{}: the crawler disclosure is not up to date", r.who);
            }
            done()
        }))
    }
}

/// Whether `parts` apply every [`Applier`] (checked when the reloader is built, in builds
/// with debug assertions).
pub(super) fn covers_every_applier(parts: &[&dyn Reload]) -> bool {
    Applier::ALL.iter().all(|a| parts.iter().any(|p| p.appliers().contains(a)))
}
