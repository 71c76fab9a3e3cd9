//! `robots-proxy evidence`: which robots.txt was in force for a URL at a past time, what
//! today's engine decides on it, and the audit records around it; `evidence export` packs the
//! versions and records of an authority over an interval, with a manifest of digests.
//!
//! Where versions come from ([`Source`]): audit files alone (`--audit`, from their
//! `robots_version` records and the records that name each version, see [`audit_source`]) and
//! state directories (`--state-dir`). Every source is read into one [`history::History`]: the
//! same digest from several sources (instances of a fleet, rotated files) is one version, and
//! its windows are built from everything every source knows of it. The instances of a fleet
//! are told apart by their records' `service.node.name`: the answer is for one instance's
//! records when they disagree (see [`instances`]).
//!
//! It never makes up an answer: when no source knows what was in force at that time, it says
//! so (exit 1) with the earliest time anything is known. Bad input (an unreadable file, a line
//! that does not parse, a time without a zone, a URL that is not http(s)) is one line and exit 2.

mod archive_source;
mod audit_source;
pub mod export;
pub mod history;
mod instances;
mod overrides;
mod replay;
mod report;
mod time;
pub mod verify_export;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::authority::Authority;
use crate::config::{Config, ConfigSources, Overrides};
use crate::policy::{FoldCase, TokenSource};
use crate::robots::ProductToken;

pub use self::time::parse_time;
pub use audit_source::Kept;
pub use history::{History, InForce, Window};

/// What can go wrong, each with its exit status ([`EvidenceError::exit_status`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// An input file could not be read.
    #[error("cannot read {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of an audit file does not parse.
    #[error("{path}:{line}: {reason}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// Why.
        reason: String,
    },
    /// A bad argument: a time without a zone, a URL that is not http(s), a bad token.
    #[error("{0}")]
    Argument(String),
    /// The configuration could not be loaded.
    #[error("configuration: {0}")]
    Config(String),
    /// A state directory's archive could not be read (a file that does not parse, a body that
    /// does not match its digest).
    #[error("archive: {0}")]
    Archive(String),
    /// No source knows what was in force: the refusal.
    #[error("{0}")]
    Unknown(String),
    /// The instances of a fleet had different things in force and nothing says which one
    /// decided (issue 39, L5): the refusal, naming what each had.
    #[error("{0}")]
    Ambiguous(String),
    /// The export could not be written (or `--out` is not empty).
    #[error("{0}")]
    Export(String),
    /// An `--audit` file's hash chain is broken (without `--allow-tampered`).
    #[error("{0}")]
    Tampered(String),
    /// The answer could not be written to standard output (other than a reader that went
    /// away, which is not an error).
    #[error("cannot write to standard output: {0}")]
    Output(std::io::Error),
}

impl EvidenceError {
    /// 1 when no answer is known or the export cannot be written; 2 for bad input.
    pub fn exit_status(&self) -> u8 {
        match self {
            EvidenceError::Unknown(_)
            | EvidenceError::Ambiguous(_)
            | EvidenceError::Export(_)
            | EvidenceError::Output(_)
            | EvidenceError::Tampered(_) => 1,
            _ => 2,
        }
    }
}

/// Where versions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// An audit file.
    Audit(PathBuf),
    /// A state directory's archive of robots.txt versions.
    StateDir(PathBuf),
}

impl Source {
    /// `audit FILE` or `state-dir DIR`.
    pub fn describe(&self) -> String {
        match self {
            Source::Audit(p) => format!("audit {}", p.display()),
            Source::StateDir(p) => format!("state-dir {}", p.display()),
        }
    }

    /// Reads the source into `history` (of `authority`, or of every authority when `None`; an
    /// audit file is read whole), keeping the audit records `keep` accepts.
    fn load(
        &self,
        authority: Option<&str>,
        history: &mut History,
        keep: &dyn Fn(&serde_json::Value, SystemTime) -> bool,
        kept: &mut Vec<Kept>,
        max_age: Duration,
    ) -> Result<(), EvidenceError> {
        match self {
            Source::Audit(path) => audit_source::read_file(path, history, keep, kept),
            Source::StateDir(dir) => {
                archive_source::read_state_dir(dir, authority, history, max_age)
            }
        }
    }
}

/// Reads every source into one history; the kept records are sorted by time (stable: in the
/// order of the sources and lines for equal times). `max_age` (`robots.max_age`) bounds an
/// archive's window in force when the archive did not keep its expiry.
pub fn load_sources(
    sources: &[Source],
    authority: Option<&str>,
    keep: &dyn Fn(&serde_json::Value, SystemTime) -> bool,
    max_age: Duration,
) -> Result<(History, Vec<Kept>), EvidenceError> {
    let mut history = History::default();
    let mut kept = Vec::new();
    for source in sources {
        source.load(authority, &mut history, keep, &mut kept, max_age)?;
    }
    kept.sort_by_key(|k| k.at);
    Ok((history, kept))
}

/// The options every form shares: the configuration and the sources.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Configuration file (TOML): `state_dir`, and `[policy]` (token sources, default token,
    /// case folding).
    #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
    pub config: Option<PathBuf>,
    /// A state directory whose archive of robots.txt versions to read (repeatable, one per
    /// instance of a fleet). Default, when no --audit is given either: the configured
    /// `state_dir`.
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dirs: Vec<PathBuf>,
    /// An audit file to read versions and records from (repeatable: rotated files, other
    /// instances).
    #[arg(long = "audit", value_name = "FILE")]
    pub audits: Vec<PathBuf>,
    /// The public key of `audit.checkpoint_key` (a JWK or PEM, as `audit public-key` prints
    /// it), to check the checkpoints of the `--audit` files with; by default the public half of
    /// the configured `audit.checkpoint_key`, if any.
    #[arg(long = "public-key", value_name = "FILE")]
    pub public_key: Option<PathBuf>,
    /// Answer for this instance of a fleet: from the audit records it wrote
    /// (`service.node.name`, its `fleet.instance`) alone. Without it, when the instances
    /// disagree at TIME and no record at TIME for the URL names one, the answer is refused.
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
}

impl SourceArgs {
    /// The sources: every --audit, then every --state-dir; the configured `state_dir` when
    /// neither is given.
    pub fn sources(&self, config: &Config) -> Vec<Source> {
        let mut sources: Vec<Source> = self.audits.iter().cloned().map(Source::Audit).collect();
        sources.extend(self.state_dirs.iter().cloned().map(Source::StateDir));
        if sources.is_empty() {
            sources.push(Source::StateDir(config.state_dir.clone()));
        }
        sources
    }

    /// Refuses `--instance` with an archive among the sources: an archive does not name its
    /// instance.
    fn check_instance(&self, sources: &[Source]) -> Result<(), EvidenceError> {
        if self.instance.is_some() && sources.iter().any(|s| matches!(s, Source::StateDir(_))) {
            return Err(EvidenceError::Argument(
                "--instance picks the records an instance wrote (service.node.name), which \
                 only audit files carry: give that instance's --audit files, without --state-dir"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// `audit verify` of each `--audit` file alone (files of several instances are several
    /// chains; each file names the hash it continues from), with the public key given or
    /// configured.
    fn check_chains(
        &self,
        config: &Config,
    ) -> Result<Vec<(String, crate::audit::verify::Report)>, EvidenceError> {
        use crate::audit::checkpoint::{load_key, PublicKey};
        let key = match (&self.public_key, &config.audit.checkpoint_key) {
            (Some(path), _) => Some(
                PublicKey::read(path)
                    .map_err(|e| EvidenceError::Argument(format!("--public-key {e}")))?,
            ),
            (None, Some(path)) => load_key(path).ok().map(|k| PublicKey::of(&k)),
            (None, None) => None,
        };
        Ok(self
            .audits
            .iter()
            .map(|path| {
                let report =
                    crate::audit::verify::verify_files(std::slice::from_ref(path), key.as_ref());
                (path.display().to_string(), report)
            })
            .collect())
    }

    fn load_config(&self) -> Result<Config, EvidenceError> {
        let sources = ConfigSources::from_process_env(self.config.clone(), Overrides::default());
        crate::config::load(sources).map_err(|e| EvidenceError::Config(e.to_string()))
    }
}

/// `robots-proxy evidence …`
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvidenceCommand {
    /// `evidence export`.
    #[command(subcommand)]
    pub command: Option<EvidenceSubcommand>,
    /// `evidence URL --at TIME`.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// The subcommands of `evidence`.
#[derive(Debug, clap::Subcommand)]
#[non_exhaustive]
pub enum EvidenceSubcommand {
    /// Write the versions, the audit records and a manifest of digests for one authority over
    /// an interval into a new directory, for handing over.
    ///
    /// Exit status: 0 when written, 1 when it cannot be (--out not empty, a write error),
    /// 2 for bad input.
    Export(export::ExportArgs),
    /// Check an export with the public key alone: every record against its inclusion proof
    /// and signed checkpoint, every version and file against its digest.
    ///
    /// Exit status: 0 valid, 1 invalid (a changed byte, a record without a proof, another
    /// key), 2 unreadable input.
    VerifyExport(verify_export::VerifyExportArgs),
}

/// `evidence URL --at TIME`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The URL (http or https).
    #[arg(value_name = "URL", required = true)]
    pub url: Option<String>,
    /// The time to replay: RFC 3339 with a zone (2026-03-03T10:00:00Z, …+01:00).
    #[arg(long, value_name = "TIME", required = true)]
    pub at: Option<String>,
    /// The crawler's product token (ExampleBot).
    #[arg(long, value_name = "TOKEN", conflicts_with = "user_agent")]
    pub token: Option<String>,
    /// A User-Agent to find the token in, as the proxy does (`policy.token_sources`; the
    /// configured `policy.default_token` when it names none).
    #[arg(long, value_name = "UA")]
    pub user_agent: Option<String>,
    /// The authenticated proxy user the request came from (`access.users_file`, whose
    /// credentials name the token): only then do allow exceptions and usage lifts apply, as
    /// at the proxy; `[usage]` crawlers named by `user` too.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The audit records shown are those for the URL within this long of TIME, either side.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub near: Duration,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Answer even when an `--audit` file's hash chain is broken (the answer names the
    /// break); without it, a broken chain is exit 1.
    #[arg(long)]
    pub allow_tampered: bool,
    /// The sources and configuration.
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// Runs `robots-proxy evidence …`: prints the answer, or one line on standard error.
pub fn run(command: EvidenceCommand) -> ExitCode {
    let (form, result) = match &command.command {
        Some(EvidenceSubcommand::Export(args)) => ("evidence export", export::run(args)),
        Some(EvidenceSubcommand::VerifyExport(args)) => {
            ("evidence verify-export", verify_export::run(args))
        }
        None => ("evidence", replay_command(&command.replay)),
    };
    let result = result.and_then(|text| write_out(&mut std::io::stdout().lock(), &text));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("robots-proxy {form}: {}", crate::output::terminal(&e.to_string()));
            ExitCode::from(e.exit_status())
        }
    }
}

/// Names on stderr what the sources skipped (an archive's authority files that cannot be
/// used), before the answer or the refusal that may follow from it.
pub(crate) fn warn_skipped(history: &History, form: &str) {
    for warning in history.warnings() {
        eprintln!("robots-proxy {form}: warning: {}", crate::output::terminal(warning));
    }
}

/// Writes the answer. A reader that went away (`evidence … | head`: a broken pipe) is the end
/// of the output, not an error (issue 39, L4: `print!` panicked there).
fn write_out(out: &mut impl std::io::Write, text: &str) -> Result<(), EvidenceError> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(EvidenceError::Output(e)),
        _ => Ok(()),
    }
}

/// The URL's authority and path as sent; refuses anything but an absolute http(s) URL.
pub fn parse_url(url: &str) -> Result<(Authority, String), EvidenceError> {
    let bad = |reason: String| EvidenceError::Argument(format!("{url:?}: {reason}"));
    let parsed = url::Url::parse(url.trim()).map_err(|e| bad(format!("not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("not an http(s) URL (scheme {:?})", parsed.scheme())));
    }
    let uri: http::Uri = url.trim().parse().map_err(|e| bad(format!("not a URL ({e})")))?;
    let authority = Authority::from_uri(&uri).map_err(|e| bad(e.to_string()))?;
    let path = crate::check::path_of_url(url).map_err(|e| bad(e.to_string()))?;
    Ok((authority, path))
}

/// An authority given as `scheme://host[:port]` (a trailing `/` allowed), normalised as the
/// audit log writes `robots.authority`.
pub fn parse_authority(text: &str) -> Result<Authority, EvidenceError> {
    let (authority, path) = parse_url(text)?;
    if path != "/" {
        return Err(EvidenceError::Argument(format!(
            "{text:?}: an authority is scheme://host[:port], without a path"
        )));
    }
    Ok(authority)
}

/// The token to decide for, and where it came from.
fn choose_token(
    args: &ReplayArgs,
    config: &Config,
) -> Result<(Option<ProductToken>, String), EvidenceError> {
    if let Some(t) = &args.token {
        let token = ProductToken::new(t.trim())
            .map_err(|e| EvidenceError::Argument(format!("--token {t:?}: {e}")))?;
        return Ok((Some(token), "--token".to_owned()));
    }
    for source in &config.policy.token_sources {
        match source {
            TokenSource::UserAgent => {
                if let Some(t) = args.user_agent.as_deref().and_then(ProductToken::from_user_agent)
                {
                    return Ok((Some(t), "--user-agent".to_owned()));
                }
            }
            TokenSource::Default => {
                if let Some(t) = &config.policy.default_token {
                    return Ok((Some(t.clone()), "policy.default_token".to_owned()));
                }
            }
            TokenSource::Header => {}
        }
    }
    Ok((None, "none: only the `*` groups apply".to_owned()))
}

/// Whether the configuration gives the origin the case-folded reading: `policy.fold_case =
/// "all"`, or a site of `policy.fold_case_sites`. (What the proxy detected from the robots.txt
/// response's headers is kept in the archive's window: see `replay_command`.)
fn folds_case(config: &Config, authority: &Authority) -> bool {
    config.policy.fold_case == FoldCase::All
        || config.policy.fold_case_sites.iter().any(|s| {
            // Normalised as the proxy normalises them (`Policy::folds_case`).
            crate::authority::SiteName::parse(s).is_ok_and(|site| site.matches(authority))
        })
}

/// `evidence URL --at TIME`: the text or JSON to print.
pub fn replay_command(args: &ReplayArgs) -> Result<String, EvidenceError> {
    let (url, at) = match (&args.url, &args.at) {
        (Some(url), Some(at)) => (url, at),
        _ => return Err(EvidenceError::Argument("give a URL and --at TIME".to_owned())),
    };
    let at = parse_time(at).map_err(|e| EvidenceError::Argument(format!("--at: {e}")))?;
    // Nothing can be known of a time that has not come (issue 39, M2: the window in force
    // was reported for 2099).
    let now = SystemTime::now();
    if at > now {
        return Err(EvidenceError::Unknown(format!(
            "{} is in the future (now: {}): no source can know what will be in force then",
            time::show(at),
            time::show(now)
        )));
    }
    let (authority, path) = parse_url(url)?;
    let config = args.sources.load_config()?;
    let (token, token_source) = choose_token(args, &config)?;
    let sources = args.sources.sources(&config);
    let name = authority.to_string();
    let near = args.near;
    let keep = |record: &serde_json::Value, when: SystemTime| {
        let field = |f: &str| record.get(f).and_then(serde_json::Value::as_str);
        let gap = when.duration_since(at).or_else(|_| at.duration_since(when)).unwrap_or_default();
        gap <= near
            && field("robots.authority") == Some(name.as_str())
            && field("robots.path") == Some(path.as_str())
    };
    args.sources.check_instance(&sources)?;
    let (history, mut records) = load_sources(&sources, Some(&name), &keep, config.robots.max_age)?;
    warn_skipped(&history, "evidence");
    // Which instance's records answer (issue 39, L5: see `instances`).
    let each = history.instances_at(&name, at);
    let flag = args.sources.instance.as_deref();
    let chosen = instances::choose(flag, &history, &each, &records, &name, at)?;
    let scope = match &chosen {
        Some(c) => {
            records.retain(|k| instances::node_name(&k.value) == Some(c.name.as_str()));
            history::Scope::Instance(Some(c.name.as_str()))
        }
        None => history::Scope::All,
    };
    let window =
        history.in_force_in(&name, at, scope).map_err(|known| refusal(&name, at, known))?;
    let body = body_in_force(&history, &window.what, &name, at)?;
    // The chain of every audit file the answer rests on (issue 39, M1): a broken one is
    // refused unless asked for (`--allow-tampered`); the answer names each file's status.
    let chains = args.sources.check_chains(&config)?;
    if !args.allow_tampered {
        use crate::audit::verify::Status;
        let broken = chains.iter().find(|(_, r)| {
            matches!(r.status, Status::Tampered | Status::Unreadable) && !report::unchained(r)
        });
        if let Some((file, report)) = broken {
            let at = report.problem.as_ref().map_or_else(String::new, |p| match p.line {
                Some(line) => format!("{}:{line}: {}", p.file, p.message),
                None => format!("{}: {}", p.file, p.message),
            });
            return Err(EvidenceError::Tampered(format!(
                "the hash chain of {file} is broken ({at}): the records cannot be relied on \
                 (`audit verify` says more; --allow-tampered answers anyway)"
            )));
        }
    }
    // The decision on what was in force: robots.txt's rules, read case-folded by configuration
    // or because the archive says the fetch of this version named a case-insensitive server
    // (the proxy then decided with it); then exceptions and usage preferences, as the proxy
    // applies them (issue 39, M4).
    let decide = |what: &InForce, body: Option<&history::Body>| {
        let detected = config.policy.fold_case == FoldCase::Detect
            && matches!(what, InForce::File(d) if history.folds_case(&name, d));
        let fold = folds_case(&config, &authority) || detected;
        let bytes = body.map(|b| &b.bytes[..]);
        let replayed = replay::replay(what, bytes, token.as_ref(), &path, fold);
        let overrides = overrides::apply(
            &config,
            &authority,
            token.as_ref(),
            args.user.as_deref(),
            &path,
            at,
            bytes,
            fold,
            &replayed,
        );
        (fold, replayed, overrides)
    };
    let (fold, replayed, overrides) = decide(&window.what, body);
    // What each instance had in force, and its decision on it (when its body is at hand).
    let entries: Vec<instances::Entry> = if each.each.len() < 2 {
        Vec::new()
    } else {
        each.each
            .iter()
            .map(|e| {
                let window = e.window.as_ref().ok();
                let decision = window.and_then(|w| {
                    let body = body_in_force(&history, &w.what, &name, at).ok()?;
                    let (_, replayed, o) = decide(&w.what, body);
                    Some((o.allowed, o.reason.clone().unwrap_or(replayed.decision.reason)))
                });
                instances::Entry {
                    instance: e.instance.clone(),
                    what: window.map(|w| w.what.clone()),
                    fetched_at: window.and_then(|w| w.fetched_before(at)),
                    decision,
                }
            })
            .collect()
    };
    let disagrees = overrides::disagreeing(&records, token.as_ref(), overrides.allowed);
    let sources_disagree = sources_disagree(&sources, &name, at, config.robots.max_age)?;
    let answer = report::Answer {
        url: url.trim(),
        authority: &name,
        path: &path,
        at,
        token: token.as_ref(),
        token_source: &token_source,
        window: &window,
        body,
        replay: &replayed,
        records: &records,
        near,
        fold_case: fold,
        sources: &sources,
        chains: &chains,
        overrides: &overrides,
        disagrees: &disagrees,
        sources_disagree: sources_disagree.as_ref(),
        instance: chosen.as_ref(),
        instances: &entries,
        instances_disagree: each.disagree(),
    };
    Ok(if args.json { report::json(&answer) } else { report::text(&answer) })
}

/// The body of what was in force for `authority` at `at` (none when no file was), or why it
/// cannot be replayed.
fn body_in_force<'h>(
    history: &'h History,
    what: &InForce,
    authority: &str,
    at: SystemTime,
) -> Result<Option<&'h history::Body>, EvidenceError> {
    let InForce::File(digest) = what else { return Ok(None) };
    let at = time::show(at);
    history.body(digest).map(Some).ok_or_else(|| match history.unusable_body(digest) {
        Some(why) => EvidenceError::Archive(format!(
            "robots.txt version sha256:{digest} of {authority} was in force at {at}, and the \
             only body of it cannot be used: {why}"
        )),
        None => EvidenceError::Unknown(format!(
            "robots.txt version sha256:{digest} of {authority} was in force at {at}, but no \
             source holds its body (no robots_version record for it): nothing to replay"
        )),
    })
}

/// With both audit files and an archive among the sources: what each kind alone says was in
/// force at `at`, when they differ (issue 39, item 8: `evidence` says when the archive and the
/// log disagree). Each `in_force` and `sha256`, or the refusal when one kind knows nothing.
fn sources_disagree(
    sources: &[Source],
    authority: &str,
    at: SystemTime,
    max_age: Duration,
) -> Result<Option<serde_json::Value>, EvidenceError> {
    let (audits, archives): (Vec<Source>, Vec<Source>) =
        sources.iter().cloned().partition(|s| matches!(s, Source::Audit(_)));
    if audits.is_empty() || archives.is_empty() {
        return Ok(None);
    }
    let none = |_: &serde_json::Value, _: SystemTime| false;
    let say = |sources: &[Source]| -> Result<serde_json::Value, EvidenceError> {
        let (history, _) = load_sources(sources, Some(authority), &none, max_age)?;
        Ok(match history.in_force_at(authority, at) {
            Ok(w) => serde_json::json!({
                "in_force": w.what.kind(),
                "sha256": match &w.what { InForce::File(d) => Some(d.clone()), _ => None },
            }),
            Err(_) => serde_json::json!({ "in_force": null, "sha256": null }),
        })
    };
    let (log, archive) = (say(&audits)?, say(&archives)?);
    Ok((log != archive).then(|| serde_json::json!({ "audit": log, "archive": archive })))
}

/// The one line refusing to answer.
fn refusal(authority: &str, at: SystemTime, unknown: history::Unknown) -> EvidenceError {
    let at = time::show(at);
    EvidenceError::Unknown(match unknown {
        history::Unknown { gap: Some((what, known_until, Some(next))), .. } => {
            let what = match &what {
                InForce::File(digest) => format!("robots.txt sha256:{digest}"),
                other => other.kind().to_owned(),
            };
            let next = time::show(next);
            format!(
                "nothing is known of {authority} at {at}: {what} is known in force until \
                 {} and the next fetch or decision known is at {next}; in between the proxy \
                 was stopped, or idle past the copy's expiry (its next request would have \
                 fetched again)",
                time::show(known_until)
            )
        }
        history::Unknown { earliest: Some(first), latest: Some(last), .. } => format!(
            "no robots.txt version is known for {authority} at {at}; earliest known: {} (the \
             sources cover {} to {})",
            time::show(first),
            time::show(first),
            time::show(last)
        ),
        _ => format!(
            "no robots.txt version is known for {authority} at {at}: the sources know nothing \
             of {authority}"
        ),
    })
}

/// The SHA-256 of a file's bytes, for the manifest and the sources list.
fn file_sha256(path: &Path) -> Result<String, EvidenceError> {
    let bytes = std::fs::read(path)
        .map_err(|source| EvidenceError::Unreadable { path: path.to_owned(), source })?;
    Ok(crate::robots_version::sha256_hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(token: Option<&str>, user_agent: Option<&str>) -> ReplayArgs {
        ReplayArgs {
            url: None,
            at: None,
            token: token.map(str::to_owned),
            user_agent: user_agent.map(str::to_owned),
            user: None,
            near: Duration::from_secs(3600),
            json: false,
            allow_tampered: false,
            sources: SourceArgs {
                config: None,
                state_dirs: Vec::new(),
                audits: Vec::new(),
                public_key: None,
                instance: None,
            },
        }
    }

    #[test]
    fn the_token_is_chosen_as_the_proxy_chooses_it() {
        let mut config = Config::default();
        let chosen = |a: &ReplayArgs, c: &Config| {
            let (t, from) = choose_token(a, c).unwrap();
            (t.map(|t| t.as_str().to_owned()), from)
        };
        let ua = "Mozilla/5.0 (compatible; ExampleBot/2.1; +https://bot.example.net)";
        assert_eq!(chosen(&args(None, Some(ua)), &config).0.as_deref(), Some("ExampleBot"));
        assert_eq!(chosen(&args(Some("OtherBot"), None), &config).0.as_deref(), Some("OtherBot"));
        assert_eq!(chosen(&args(None, None), &config).0, None);
        config.policy.default_token = ProductToken::new("DefaultBot").ok();
        let (token, from) = chosen(&args(None, None), &config);
        assert_eq!((token.as_deref(), from.as_str()), (Some("DefaultBot"), "policy.default_token"));
        // Without the user-agent source, the User-Agent is not read, as by the proxy.
        config.policy.token_sources = vec![TokenSource::Header, TokenSource::Default];
        assert_eq!(chosen(&args(None, Some(ua)), &config).0.as_deref(), Some("DefaultBot"));
        assert!(choose_token(&args(Some("not/a token"), None), &config).is_err());
    }

    #[test]
    fn only_http_urls_and_bare_authorities() {
        let (authority, path) = parse_url("HTTP://Example.COM:80/a/..%2fb?q#f").unwrap();
        assert_eq!(
            (authority.to_string().as_str(), path.as_str()),
            ("http://example.com", "/a/..%2fb?q")
        );
        assert!(parse_url("ftp://example.com/x")
            .unwrap_err()
            .to_string()
            .contains("not an http(s) URL"));
        assert!(parse_url("/just/a/path").is_err());
        assert_eq!(parse_authority("https://a.example/").unwrap().to_string(), "https://a.example");
        assert!(parse_authority("https://a.example/x").is_err());
    }
}
