//! The configuration as written ([`RawConfig`]: each section in its raw form) and the one
//! conversion to [`Config`]: each section's own `TryFrom`, the exceptions' check, and the rules
//! between sections (`super::across`), every problem of every section collected.

use std::path::PathBuf;

use serde::Deserialize;

use super::*;
use robots_proxy_units::Problems;

/// The configuration as written: what the sources merge into and serde reads, each section
/// unchecked. [`Config`] is made from it by `TryFrom`, and only so.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawConfig {
    /// `state_dir`.
    pub state_dir: PathBuf,
    /// `[proxy]`.
    pub proxy: RawProxySection,
    /// `[admin]`.
    pub admin: RawAdminSection,
    /// `[upstream]`.
    pub upstream: RawUpstreamSection,
    /// `[robots]`.
    pub robots: robots_proxy_sitefiles::RawRobotsSection,
    /// `[policy]`.
    pub policy: robots_proxy_decide::RawPolicySection,
    /// `[audit]`.
    pub audit: robots_proxy_audit::RawAuditSection,
    /// `[archive]`.
    pub archive: robots_proxy_archive::RawArchiveSection,
    /// `[log]`.
    pub log: RawLogSection,
    /// `[https]`.
    pub https: robots_proxy_net::tls::RawHttpsSection,
    /// `[pacing]`.
    pub pacing: robots_proxy_pace::RawPacingSection,
    /// `[usage]`.
    pub usage: robots_proxy_decide::usage::RawUsageSection,
    /// `[access]`.
    pub access: robots_proxy_access::RawAccessSection,
    /// `[limits]`.
    pub limits: robots_proxy_net::limits::RawLimitsSection,
    /// `[fleet]`.
    pub fleet: robots_proxy_fleet::RawFleetSection,
    /// `[signing]`.
    pub signing: robots_proxy_identity::RawSigningSection,
    /// `[disclosure]`.
    pub disclosure: robots_proxy_disclosure::RawDisclosureSection,
    /// `[[exceptions]]`.
    pub exceptions: Vec<robots_proxy_decide::ExceptionEntry>,
}

impl Default for RawConfig {
    fn default() -> Self {
        RawConfig {
            state_dir: PathBuf::from("./state"),
            proxy: Default::default(),
            admin: Default::default(),
            upstream: Default::default(),
            robots: Default::default(),
            policy: Default::default(),
            audit: Default::default(),
            archive: Default::default(),
            log: Default::default(),
            https: Default::default(),
            pacing: Default::default(),
            usage: Default::default(),
            access: Default::default(),
            limits: Default::default(),
            fleet: Default::default(),
            signing: Default::default(),
            disclosure: Default::default(),
            exceptions: Vec::new(),
        }
    }
}

/// Converts one section, keeping its problems.
fn part<R, T: TryFrom<R, Error = Problems>>(problems: &mut Problems, raw: R) -> Option<T> {
    T::try_from(raw).map_err(|found| problems.absorb(found)).ok()
}

impl TryFrom<RawConfig> for Config {
    type Error = Problems;

    /// `state_dir`, the rules between sections, every section through its own `TryFrom` in
    /// the order of the file, then `[[exceptions]]`: every problem at once.
    fn try_from(raw: RawConfig) -> Result<Config, Problems> {
        let mut problems = Problems::new();
        problems.need(!raw.state_dir.as_os_str().is_empty(), "state_dir", || {
            "must not be empty".into()
        });
        // The rules between sections first: where a key breaks one of them and a rule of its
        // own section too, the first problem named is the one between sections, as it was
        // before the sections were converted one by one.
        problems.absorb(super::across::problems(&raw));
        let p = &mut problems;
        let (proxy, admin, upstream, robots, policy, audit, archive, log) = (
            part(p, raw.proxy),
            part(p, raw.admin),
            part(p, raw.upstream),
            part(p, raw.robots),
            part(p, raw.policy),
            part(p, raw.audit),
            part(p, raw.archive),
            part(p, raw.log),
        );
        let (https, pacing, usage, access, limits, fleet, signing, disclosure) = (
            part(p, raw.https),
            part(p, raw.pacing),
            part(p, raw.usage),
            part(p, raw.access),
            part(p, raw.limits),
            part(p, raw.fleet),
            part(p, raw.signing),
            part(p, raw.disclosure),
        );
        let exceptions = robots_proxy_decide::exceptions::checked(raw.exceptions)
            .map_err(|found| problems.absorb(found))
            .ok();
        let built = (|| {
            Some(Config {
                state_dir: raw.state_dir,
                proxy: proxy?,
                admin: admin?,
                upstream: upstream?,
                robots: robots?,
                policy: policy?,
                audit: audit?,
                archive: archive?,
                log: log?,
                https: https?,
                pacing: pacing?,
                usage: usage?,
                access: access?,
                limits: limits?,
                fleet: fleet?,
                signing: signing?,
                disclosure: disclosure?,
                exceptions: exceptions?,
            })
        })();
        match built {
            Some(config) if problems.is_empty() => Ok(config),
            _ => Err(problems),
        }
    }
}
