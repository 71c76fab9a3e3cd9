//! Reloading the configuration of a running proxy: on SIGHUP and on `POST /api/reload` (the
//! admin listener), one at a time.
//!
//! A reload reopens the audit log (log rotation sends SIGHUP too), reads the users file again,
//! then reads the configuration from the sources the process started with and checks it as
//! `serve` would (`preflight`). A configuration with any error is refused as a whole: the
//! running one stays, and the report lists every error. Otherwise what the typed list
//! [`crate::config::RELOADABLE`] names is applied to requests and connections that start from now on; open connections and
//! tunnels keep the settings they started with, and the robots cache and the pace are kept.
//! Changes to other keys are reported as needing a restart, with the reason
//! ([`crate::config::restart_reason`]).
//!
//! The report ([`ReloadReport`]) says key by key what changed (secrets masked), what needs a
//! restart, and every error; `GET /api/reload/preview` gives the same report for the
//! configuration on disk without applying it (`robots-proxy config check --against-running`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::cache::RobotsCache;
use crate::config::{self, Applier, Change, Config, ConfigError};
// The report of a reload lives with the configuration (`config::report`), so the admin listener
// answers with it without reaching the reloader; re-exported here under its old paths.
pub use crate::config::report::{
    Outcome, Pending, ReloadError, ReloadReport, Reloads, Trigger, UsersReport,
};
use crate::on_disk::FileContents;
use crate::proxy::Proxy;
use crate::signing::Signer;
use crate::tls::ca::{CaError, CertificateAuthority};
use crate::tls::listener::ListenerTls;
use crate::tls::HttpsMode;

mod parts;
use parts::{LogFilter, Reload, Reloading};

/// Reads the configuration again from the sources the process started with (file,
/// environment, flags), checked as `serve` checks it.
pub type Loader = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// The process's one reloader: serializes reloads and keeps what they compare against.
pub struct Reloader {
    load: Loader,
    proxy: Proxy,
    cache: Arc<RobotsCache>,
    /// The key directory's signer (`signing.directory_listen`), replaced with the proxy's.
    directory: Option<Arc<arc_swap::ArcSwap<Signer>>>,
    /// The public disclosure of the crawlers, brought up to date by every reload applied.
    disclosure: Arc<crate::disclosure::Disclosure>,
    /// The TLS listener's configuration in force, when `proxy.tls_listen` is on.
    listener_tls: Option<ListenerTls>,
    /// The configuration the process started with: what the keys that need a restart still
    /// have.
    started: Config,
    /// What the files `started` names held at start: a start-only file changed on disk is
    /// reported as needing a restart.
    started_files: FileContents,
    /// The configuration last applied (at start, or by the last reload), and what its files
    /// held then; held for the whole of a reload, so reloads run one at a time.
    applied: tokio::sync::Mutex<(Config, FileContents)>,
}

impl Reloader {
    /// A reloader for `proxy` and `cache`, which were built from `started`; `load` reads the
    /// configuration again. `directory`: the key directory's signer, when it is served.
    pub fn new(
        load: Loader,
        started: Config,
        proxy: Proxy,
        cache: Arc<RobotsCache>,
        directory: Option<Arc<arc_swap::ArcSwap<Signer>>>,
        disclosure: Arc<crate::disclosure::Disclosure>,
        listener_tls: Option<ListenerTls>,
    ) -> Self {
        let started_files = FileContents::read(&started);
        let reloader = Reloader {
            load,
            proxy,
            cache,
            directory,
            disclosure,
            listener_tls,
            applied: tokio::sync::Mutex::new((started.clone(), started_files.clone())),
            started,
            started_files,
        };
        debug_assert!(
            parts::covers_every_applier(&reloader.parts()),
            "an applier of config::RELOADABLE has no part in the reloader"
        );
        reloader
    }

    /// Reloads (or, for [`Trigger::Preview`], compares only), logs the report and returns it.
    pub async fn reload(&self, trigger: Trigger) -> ReloadReport {
        let mut guard = self.applied.lock().await;
        let (applied, applied_files) = &mut *guard;
        let report = self.run(trigger, applied, applied_files).await;
        report.log();
        if trigger != Trigger::Preview {
            self.proxy.metrics().reloaded(report.outcome == Outcome::Applied);
        }
        if report.outcome == Outcome::Applied {
            let _ = self.proxy.policy().exceptions().warn_expiring(self.proxy.clock().now());
            tracing::info!(
                changed = report.changed.len(),
                exceptions = applied.exceptions.len(),
                "{}: configuration reloaded",
                trigger.name()
            );
        } else if report.outcome == Outcome::Refused {
            tracing::error!(
                errors = report.errors.len(),
                "{}: the new configuration is refused; the running configuration stays",
                trigger.name()
            );
        }
        report
    }

    async fn run(
        &self,
        trigger: Trigger,
        applied: &mut Config,
        applied_files: &mut FileContents,
    ) -> ReloadReport {
        let who = trigger.name();
        let mut report = ReloadReport::new(trigger);
        let preview = trigger == Trigger::Preview;
        if !preview {
            // Log rotation sends SIGHUP too: the file is reopened whatever the configuration.
            match self.proxy.audit().reopen().await {
                Ok(()) => tracing::info!("{who}: audit log reopened"),
                Err(e) => tracing::error!(error = %e, "{who}: cannot reopen the audit log"),
            }
            report.audit_reopened = Some(true);
            // The users file too, whatever the configuration: removing a line revokes a user.
            report.users_file = self.reload_users(who);
        }
        let new = match (self.load)() {
            Ok(config) => config,
            Err(e) => {
                report.errors = errors_of(&e);
                return report;
            }
        };
        report.changed =
            config::changes(applied, &new).into_iter().filter(|c| c.reloadable).collect();
        report.restart_required = config::changes(&self.started, &new)
            .into_iter()
            .filter(|c| !c.reloadable)
            .map(|c| Pending {
                reason: config::restart_reason(&c.key),
                key: c.key,
                running: c.old,
                configured: c.new,
            })
            .collect();
        // Files changed on disk at the same path: those a reload reads again are changes,
        // those read at start only need a restart.
        let files = FileContents::read(&new);
        let on_disk = applied_files.changed(&files);
        for key in on_disk.iter().filter(|key| config::is_reloadable(key)) {
            let path = files.path(key).map(|p| p.display().to_string()).unwrap_or_default();
            report.changed.push(Change {
                key: (*key).to_owned(),
                old: serde_json::Value::from(path.clone()),
                new: serde_json::Value::from(format!("{path} (changed on disk)")),
                reloadable: true,
            });
        }
        report.changed.sort_by(|a, b| a.key.cmp(&b.key));
        for key in self.started_files.changed(&files) {
            if config::is_reloadable(key) || report.restart_required.iter().any(|p| p.key == key) {
                continue;
            }
            let path = files.path(key).map(|p| p.display().to_string()).unwrap_or_default();
            report.restart_required.push(Pending {
                key: key.to_owned(),
                running: serde_json::Value::from(path.clone()),
                configured: serde_json::Value::from(format!("{path} (changed on disk)")),
                reason: crate::on_disk::ON_DISK,
            });
        }
        // Everything that can fail is built before anything is applied.
        let rust_log = std::env::var("RUST_LOG").ok();
        if let Err(e) = crate::logging::filter(&new.log, rust_log.as_deref()) {
            return report.refuse(Some("log.level"), &e);
        }
        let signer = match Signer::new(&new.signing, &new.state_dir) {
            Ok(signer) => signer.map(Arc::new),
            Err(e) => return report.refuse(Some("signing"), &e),
        };
        if preview {
            // Preflight has checked the CA files a configuration names; a preview creates
            // nothing, so the default CA under state_dir is not made here.
            report.outcome = Outcome::Preview;
            return report;
        }
        let ca_on_disk = on_disk.iter().any(|k| config::applied_by(Applier::Ca).any(|c| c == *k));
        let ca = match self.ca_for(applied, &new, ca_on_disk) {
            Ok(ca) => ca,
            Err(e) => return report.refuse(Some("https.ca_cert"), &e),
        };
        let changed: Vec<String> = report.changed.iter().map(|c| c.key.clone()).collect();
        let in_force = config::in_force(&self.started, &new);
        let reloading = Reloading {
            who,
            new: &new,
            in_force: &in_force,
            started: &self.started,
            changed: &changed,
            rust_log: rust_log.as_deref(),
            signer,
            ca,
        };
        // Every part is prepared, then every part applied: one that cannot be prepared
        // refuses the reload with nothing applied.
        let mut applying = Vec::new();
        for part in self.parts() {
            match part.prepare(&reloading) {
                Ok(apply) => applying.push(apply),
                Err(refused) => return report.refuse(Some(refused.key), &refused.message),
            }
        }
        for apply in applying {
            apply(&mut report).await;
        }
        *applied = new;
        *applied_files = files;
        report.outcome = Outcome::Applied;
        report
    }

    /// The parts a reload brings up to date, in the order they are prepared and applied.
    fn parts(&self) -> [&dyn Reload; 7] {
        [
            &self.listener_tls,
            &self.proxy,
            &*self.cache,
            &self.directory,
            self.proxy.audit(),
            &LogFilter,
            &*self.disclosure,
        ]
    }

    /// Reads the users file in force again; `None` without one.
    fn reload_users(&self, who: &str) -> Option<UsersReport> {
        match self.proxy.reload_users()? {
            Ok(path) => {
                tracing::info!(file = %path.display(), "{who}: users file reloaded");
                Some(UsersReport { file: path.display().to_string(), reloaded: true, error: None })
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "{who}: the users file is refused; the running users stay"
                );
                Some(UsersReport {
                    file: self
                        .proxy
                        .users_file()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    reloaded: false,
                    error: Some(e.to_string()),
                })
            }
        }
    }

    /// The CA for `new`: the one in force when its files are the same paths with the same
    /// contents (`on_disk`: they changed), else loaded (or, the default one under
    /// `state_dir`, made) now; `None` unless `https.mode = "intercept"`.
    fn ca_for(
        &self,
        applied: &Config,
        new: &Config,
        on_disk: bool,
    ) -> Result<Option<Arc<CertificateAuthority>>, CaError> {
        if new.https.mode != HttpsMode::Intercept {
            return Ok(None);
        }
        let same =
            !on_disk && crate::preflight::ca_files(applied).0 == crate::preflight::ca_files(new).0;
        if let (true, Some(ca)) = (same, self.proxy.ca()) {
            return Ok(Some(ca));
        }
        let (ca, created) = load_ca(new)?;
        if created {
            tracing::warn!(
                cert = %crate::preflight::ca_files(new).0.cert.display(),
                "created a new CA for HTTPS interception; crawlers must trust this certificate"
            );
        }
        Ok(Some(Arc::new(ca)))
    }
}

/// The interception CA of `config`: a CA the operator named is loaded, never generated; only
/// the default one under `state_dir` is made when missing (`true` then).
pub fn load_ca(config: &Config) -> Result<(CertificateAuthority, bool), CaError> {
    let (files, configured) = crate::preflight::ca_files(config);
    if configured {
        CertificateAuthority::load(&files).map(|ca| (ca, false))
    } else {
        CertificateAuthority::load_or_create(&files)
    }
}

/// Every problem of a configuration that cannot be loaded.
fn errors_of(error: &ConfigError) -> Vec<ReloadError> {
    match error {
        ConfigError::Invalid(problems) => problems
            .iter()
            .map(|p| ReloadError {
                key: p.key.clone(),
                origin: p.origin.as_ref().map(ToString::to_string),
                message: p.message.clone(),
            })
            .collect(),
        other => vec![ReloadError { key: None, origin: None, message: other.to_string() }],
    }
}

impl Reloads for Reloader {
    fn reload(&self, trigger: Trigger) -> Pin<Box<dyn Future<Output = ReloadReport> + Send + '_>> {
        Box::pin(Reloader::reload(self, trigger))
    }
}
