//! The `robots-proxy` command line.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// mimalloc: the proxy allocates small, short-lived buffers per request on every worker thread,
/// where glibc's allocator spends a measurable share of the CPU (see the README's benchmarks).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use robots_proxy::check::{self, Outcome};
use robots_proxy::robots::ProductToken;

/// A forward HTTP proxy that makes any crawler obey robots.txt.
#[derive(Parser)]
#[command(name = "robots-proxy", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Test a robots.txt against URLs, offline.
    ///
    /// Exit status: 0 when every URL is allowed, 1 when any is disallowed, 2 on a usage or input
    /// error.
    Check(CheckArgs),
    /// Run the proxy.
    Serve(ServeArgs),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Manage the proxy's certificate authority (for HTTPS interception).
    #[command(subcommand)]
    Ca(CaCommand),
    /// Probe a running proxy's admin listener (for container health checks).
    ///
    /// Exit status: 0 when the answer is 2xx, 1 otherwise.
    Health(HealthArgs),
    /// Manage proxy users (access.users_file).
    #[command(subcommand)]
    User(UserCommand),
    /// Manage Web Bot Auth signing keys and their directory ([signing]).
    #[command(subcommand)]
    Keys(robots_proxy::signing::commands::KeysCommand),
    /// Verify audit files: the hash chain and the signed checkpoints (docs/audit.md).
    #[command(subcommand)]
    Audit(robots_proxy::audit::commands::AuditCommand),
    /// Replay a past decision: the robots.txt version in force for a URL at a time, what
    /// today's engine decides on it, and the audit records around it; or export the evidence
    /// of one authority over an interval (`evidence export`).
    ///
    /// Exit status: 0 with an answer, 1 when no version is known at that time (or the export
    /// cannot be written), 2 for bad input.
    Evidence(Box<robots_proxy::evidence::EvidenceCommand>),
}

#[derive(Args)]
struct HealthArgs {
    /// The URL to probe (plain http). Default: /healthz on the configured `admin.listen`
    /// (an unspecified address such as 0.0.0.0 is probed on loopback).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Configuration file (TOML), to find `admin.listen`.
    #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
    config: Option<PathBuf>,
    /// Give up after this long ("5s").
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: std::time::Duration,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Read a password from standard input (its first line) and print the users-file line
    /// `NAME:$argon2id$…[:TOKEN]` for it.
    Hash {
        /// The user name (no ':' or whitespace).
        name: String,
        /// Tie the user to this product token: robots.txt groups for it apply to the user's
        /// requests, whatever their User-Agent.
        #[arg(long, value_name = "TOKEN")]
        token: Option<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate the layered configuration (defaults, file, ROBOTS_PROXY_* environment, flags)
    /// and print the effective result. Also checks what `serve` needs from the machine, as
    /// `serve` does before it starts: files that must exist and parse (users, TLS, CA, signing
    /// keys) and directories that must be creatable (state_dir, the audit log's). Nothing is
    /// created. Exit 1 with a message naming the key on any error.
    Check {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
        /// Address to listen on (overrides `proxy.listen`).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Address of the admin listener (overrides `admin.listen`).
        #[arg(long, value_name = "ADDR")]
        admin_listen: Option<std::net::SocketAddr>,
    },
}

#[derive(Subcommand)]
enum CaCommand {
    /// Write a new CA certificate (ca.pem) and key (ca-key.pem, mode 0600), where `serve`
    /// looks for them: `https.ca_cert` and `https.ca_key` when set, else `ca/` under
    /// `state_dir`, from the layered configuration (file, ROBOTS_PROXY_* environment).
    ///
    /// Exit status: 0 when written, 1 when it cannot be (an existing CA is never overwritten,
    /// a bad configuration), 2 on a usage error.
    Init {
        /// Directory to write ca.pem and ca-key.pem into, instead of where the configuration
        /// says (the configuration is then not read).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Configuration file (TOML), to find `state_dir`, `https.ca_cert` and `https.ca_key`.
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (overrides `proxy.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Address of the admin listener: metrics, health, status page (overrides `admin.listen`).
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<std::net::SocketAddr>,
    /// Configuration file (TOML). Without one, built-in defaults apply.
    #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    /// The robots.txt file to test.
    #[arg(long, value_name = "FILE", required_unless_present = "jsonl")]
    robots: Option<PathBuf>,
    /// The crawler's product token (`ExampleBot`), or a whole User-Agent string from which the
    /// token is found. Without one, only the `*` groups apply.
    #[arg(long, value_name = "TOKEN")]
    agent: Option<String>,
    /// Also show the groups that applied and every rule that matched, longest first.
    #[arg(long)]
    explain: bool,
    /// Decide as the proxy decides a request: on the path as written and on every reading an
    /// origin server may apply to it (percent-decoded with dot-segments removed and slashes
    /// merged, `\` as `/`, `;parameters` dropped). Lists every reading that differs.
    #[arg(long)]
    as_proxy: bool,
    /// Decide as the proxy would for a crawler fetching for this purpose (`train-ai`, `ai-use`,
    /// `search`; repeatable): a URL whose AI usage preferences disallow it is disallowed.
    #[arg(long, value_name = "PURPOSE", value_parser = parse_purpose)]
    purpose: Vec<robots_proxy::robots::usage::Category>,
    /// Read JSON lines on standard input, each
    /// `{"robots": "<body>" | "robots_file": "<path>", "agent": "...", "url": "...",
    /// "purposes": ["train-ai", ...]}`, and write one JSON answer per line:
    /// `{"allowed": bool, "line": N|null, "rule": "..."|null}`, with `"purpose"` and
    /// `"usage_line"` added when a usage preference refuses an allowed URL, or
    /// `{"error": "..."}` for a bad line. `--agent` and `--purpose` apply to lines that give no
    /// `"agent"` or `"purposes"`. The exit status is as for URLs: 0 when every line is allowed,
    /// 1 when any is disallowed, 2 when any line is an error (every line is still answered).
    #[arg(long, conflicts_with_all = ["robots", "urls", "explain", "as_proxy"])]
    jsonl: bool,
    /// Absolute URLs to check.
    #[arg(value_name = "URL", required_unless_present = "jsonl")]
    urls: Vec<String>,
}

fn parse_purpose(s: &str) -> Result<robots_proxy::robots::usage::Category, String> {
    robots_proxy::robots::usage::Category::from_label(s)
        .ok_or_else(|| format!("unknown purpose {s:?} (known: train-ai, ai-use, search)"))
}

/// An error and its causes, each said once: error types that show their source in their own
/// message (`{path}: {source}`) would otherwise have it repeated by the chain
/// ("No such file or directory (os error 2): No such file or directory (os error 2)").
fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

fn main() -> ExitCode {
    // An empty ROBOTS_PROXY_CONFIG means no file, as if it were unset (clap would read it as an
    // empty --config). Nothing else runs yet: no other thread reads the environment.
    if std::env::var_os(robots_proxy::config::CONFIG_FILE_ENV).is_some_and(|v| v.is_empty()) {
        std::env::remove_var(robots_proxy::config::CONFIG_FILE_ENV);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(args),
        Command::Ca(CaCommand::Init { dir, config }) => {
            let files = match dir {
                Some(dir) => robots_proxy::tls::ca::CaFiles::in_dir(&dir),
                None => match serve::load(config, None, None) {
                    Ok(config) => robots_proxy::preflight::ca_files(&config).0,
                    Err(e) => {
                        eprintln!("robots-proxy ca init: {}", describe(&e));
                        return ExitCode::from(1);
                    }
                },
            };
            match robots_proxy::tls::ca::init(&files) {
                Ok(()) => {
                    println!("CA certificate: {}", files.cert.display());
                    println!("CA key:         {} (mode 0600)", files.key.display());
                    println!(
                        "Trust the certificate in your crawlers; see README, \"Trusting the CA\"."
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy ca init: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::User(UserCommand::Hash { name, token }) => {
            let mut password = String::new();
            if let Err(e) = io::stdin().read_line(&mut password) {
                eprintln!("robots-proxy user hash: cannot read the password: {e}");
                return ExitCode::from(2);
            }
            let password = password.trim_end_matches(['\r', '\n']);
            if password.is_empty() {
                eprintln!("robots-proxy user hash: the password (first line of stdin) is empty");
                return ExitCode::from(2);
            }
            match robots_proxy::access::hash_line(&name, password, token.as_deref()) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy user hash: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Health(args) => health::run(args),
        Command::Evidence(command) => robots_proxy::evidence::run(*command),
        Command::Keys(command) => robots_proxy::signing::commands::run(command, &|file| {
            serve::load(file, None, None)
                .map(|config| (config.signing, config.state_dir))
                .map_err(|e| describe(&e))
        }),
        Command::Audit(command) => robots_proxy::audit::commands::run(command, &|file| {
            serve::load(file, None, None).map(|config| config.audit).map_err(|e| describe(&e))
        }),
        Command::Config(ConfigCommand::Check { config, listen, admin_listen }) => {
            match serve::check(config, listen, admin_listen) {
                Ok(config) => {
                    print!("{}", robots_proxy::config::render(&config));
                    // What each exception covers, as comments: the output stays a configuration.
                    for line in robots_proxy::policy::exceptions::describe(&config.exceptions) {
                        println!("# {line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy config check: {}", describe(&e));
                    ExitCode::from(1)
                }
            }
        }
        Command::Serve(args) => match serve::run(args.config, args.listen, args.admin_listen) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("robots-proxy serve: {}", describe(&e));
                ExitCode::from(1)
            }
        },
    }
}

mod serve {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::SystemTime;

    use anyhow::Context;
    use tokio::signal::unix::{signal, SignalKind};

    use robots_proxy::audit::AuditLog;
    use robots_proxy::cache::RobotsCache;
    use robots_proxy::clock::{Clock, SystemClock};
    use robots_proxy::config::{self, Config, ConfigSources, Overrides};
    use robots_proxy::disclosure::Disclosure;
    use robots_proxy::fleet;
    use robots_proxy::notify::notify;
    use robots_proxy::proxy::Proxy;
    use robots_proxy::tls::ca::CertificateAuthority;
    use robots_proxy::tls::HttpsMode;

    /// Where the configuration comes from: the file and flags given at start, with the process
    /// environment. Kept, so that a reload reads the same sources again.
    #[derive(Clone)]
    pub(crate) struct Sources {
        file: Option<PathBuf>,
        overrides: Overrides,
    }

    impl Sources {
        pub(crate) fn new(
            file: Option<PathBuf>,
            listen: Option<SocketAddr>,
            admin_listen: Option<SocketAddr>,
        ) -> Self {
            Sources { file, overrides: Overrides { listen, admin_listen, ..Default::default() } }
        }

        /// Loads the layered configuration: defaults, file, environment, flags.
        pub(crate) fn load(&self) -> Result<Config, config::ConfigError> {
            config::load(ConfigSources::from_process_env(self.file.clone(), self.overrides.clone()))
        }

        /// [`Sources::load`], then what the configuration needs from the machine (files,
        /// directories; `robots_proxy::preflight`): what `config check`, `serve` and a reload
        /// all refuse alike.
        pub(crate) fn load_checked(&self) -> Result<Config, config::ConfigError> {
            let config = self.load()?;
            robots_proxy::preflight::check(&config)?;
            Ok(config)
        }
    }

    /// `config check`: the configuration `serve` would run with, refused where `serve` would
    /// refuse it.
    pub(crate) fn check(
        config: Option<PathBuf>,
        listen: Option<SocketAddr>,
        admin_listen: Option<SocketAddr>,
    ) -> anyhow::Result<Config> {
        Ok(Sources::new(config, listen, admin_listen).load_checked()?)
    }

    /// Loads the layered configuration: defaults, file, environment, flags.
    pub(crate) fn load(
        config: Option<PathBuf>,
        listen: Option<SocketAddr>,
        admin_listen: Option<SocketAddr>,
    ) -> anyhow::Result<Config> {
        Ok(Sources::new(config, listen, admin_listen).load()?)
    }

    pub(crate) fn run(
        config: Option<PathBuf>,
        listen: Option<SocketAddr>,
        admin_listen: Option<SocketAddr>,
    ) -> anyhow::Result<()> {
        let sources = Sources::new(config, listen, admin_listen);
        let config = sources.load_checked()?;
        robots_proxy::logging::init(&config.log)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        runtime.block_on(serve(config, sources))
    }

    /// Tells systemd (`Type=notify`) about the service; not being under systemd is fine.
    fn tell_systemd(state: &str) {
        if let Err(e) = notify(state) {
            tracing::warn!(error = %e, state, "cannot notify systemd");
        }
    }

    async fn serve(config: Config, sources: Sources) -> anyhow::Result<()> {
        // Handlers first: a SIGHUP that arrives once the listening lines are out (a supervisor
        // or test reacting to them) must find a handler, not the default action, which kills.
        // SIGHUP: reload the configuration and reopen the audit log (logrotate).
        // SIGTERM / SIGINT: stop gracefully.
        let mut hup = signal(SignalKind::hangup())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // The one TLS client configuration and the one destination guard of the process,
        // shared by the robots.txt fetcher and the proxy (forwards, tunnels): the listeners
        // the guard learns below are refused by every component that connects out (SSRF).
        let tls =
            Arc::new(robots_proxy::tls::client_config(config.https.upstream_ca_file.as_deref())?);
        let guard = Arc::new(config.destination_guard());
        let connector = robots_proxy::tls::https_connector(
            (*tls).clone(),
            config.robots.connect_timeout,
            guard.clone(),
        );
        let cache =
            Arc::new(RobotsCache::with_connector(config.robots.clone(), clock.clone(), connector));
        // RFC 9309's stale copies and 30-day rule survive a restart (state_dir/robots/).
        let robots_dir = config.state_dir.join("robots");
        cache
            .persist_in(robots_dir.clone())
            .with_context(|| format!("cannot keep robots.txt state in {}", robots_dir.display()))?;
        // Every robots.txt version decided with, and when each was in force (robots-archive/).
        if config.archive.enabled {
            let archive = robots_proxy::archive::Archive::open(&config.state_dir, &config.archive)
                .context("cannot read the robots.txt archive ([archive])")?;
            cache.archive_to(Arc::new(archive));
        }
        let audit_path = config.audit_path();
        let audit = AuditLog::open(audit_path.clone(), config.audit.clone())
            .with_context(|| format!("cannot open the audit log {}", audit_path.display()))?;
        let ca = if config.https.mode == HttpsMode::Intercept {
            // A CA the operator named is loaded, never generated (preflight has checked that
            // its files exist); only the default one under state_dir is made when missing.
            let (files, configured) = robots_proxy::preflight::ca_files(&config);
            let (authority, created) = if configured {
                CertificateAuthority::load(&files).map(|ca| (ca, false))
            } else {
                CertificateAuthority::load_or_create(&files)
            }
            .with_context(|| format!("cannot load the CA ({})", files.cert.display()))?;
            if created {
                tracing::warn!(
                    cert = %files.cert.display(),
                    "created a new CA for HTTPS interception; crawlers must trust this certificate \
                     (curl --cacert, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, NODE_EXTRA_CA_CERTS)"
                );
            }
            eprintln!(
                "robots-proxy HTTPS interception CA: {} (crawlers must trust it)",
                files.cert.display()
            );
            Some(Arc::new(authority))
        } else {
            None
        };
        // [fleet]: with fleet.redis set, robots.txt and the pace are shared through Redis.
        let fleet =
            fleet::Fleet::new(&config.fleet, &fleet::view::default_name(fleet_port(&config)))?;
        let pacer = match &fleet {
            None => Arc::new(robots_proxy::pacing::Pacer::new(&config.pacing)?),
            Some(fleet) => {
                cache.share_with(Arc::new(fleet::robots::SharedRedis::new(fleet.clone())));
                let keep = robots_proxy::pacing::idle_after(&config.pacing)?;
                let lease = fleet::pace::slot_lease(config.upstream.response_timeout);
                let store = Arc::new(fleet::pace::RedisPace::new(fleet.clone(), keep, lease));
                audit.set_node_name(fleet.instance());
                tokio::spawn(fleet::robots::follow_purges(fleet.clone(), cache.clone()));
                tracing::info!(
                    instance = %fleet.instance(), redis = %fleet.redis_url(),
                    on_redis_error = ?config.fleet.on_redis_error,
                    "fleet: sharing robots.txt and the pace through Redis"
                );
                Arc::new(robots_proxy::pacing::Pacer::with_store(&config.pacing, store)?)
            }
        };
        let signer = robots_proxy::signing::Signer::new(&config.signing, &config.state_dir)
            .context("cannot set up signing ([signing])")?
            .map(Arc::new);
        let parts = robots_proxy::proxy::ProxyParts {
            fleet: fleet.clone(),
            store: cache,
            audit: audit.clone(),
            clock: clock.clone(),
            ca,
            guard: guard.clone(),
            tls,
            pacer,
            signer: signer.clone(),
        };
        let proxy = Proxy::new(&config, parts)?;
        // A backlog to match limits.max_connections (the kernel caps it at somaxconn): with
        // tokio's default of 128, a burst of new crawler connections overflowed the queue and
        // waited a second for the SYN to be sent again.
        let backlog = u32::try_from(config.limits.max_connections.clamp(128, 4096)).unwrap_or(1024);
        let listener = crate::listen(config.proxy.listen, backlog)
            .with_context(|| format!("cannot listen on {} (proxy.listen)", config.proxy.listen))?;
        let admin_listener = tokio::net::TcpListener::bind(config.admin.listen)
            .await
            .with_context(|| format!("cannot listen on {} (admin.listen)", config.admin.listen))?;
        let tls_listener = match config.proxy.tls_listen {
            None => None,
            Some(addr) => Some(crate::tls_listener(&config, addr, backlog)?),
        };
        // The disclosure of the crawlers, on the directory listener; brought up to date here
        // and on every reload (`reload`).
        let disclosure = Arc::new(Disclosure::open(&config.state_dir));
        let inputs = config.disclosure_inputs();
        disclosure.update(&inputs, &config.state_dir, SystemTime::now())?;
        let directory_listener = match (config.signing.directory_listen, &signer) {
            (Some(addr), Some(signer)) => {
                let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
                    format!("cannot listen on {addr} (signing.directory_listen)")
                })?;
                Some((listener, signer.clone()))
            }
            (Some(_), None) => {
                anyhow::bail!("signing.directory_listen is set but signing.keys is empty")
            }
            (None, _) => None,
        };
        let local = listener.local_addr()?;
        let admin_local = admin_listener.local_addr()?;
        // The bound addresses (the real ports, with port 0 configured), before any serves:
        // no listener is ever a destination.
        guard.add_own_listener(local);
        guard.add_own_listener(admin_local);
        if let Some(fleet) = &fleet {
            let metrics = proxy.metrics().clone();
            let counts: fleet::view::Counts = Arc::new(move || metrics.totals());
            tokio::spawn(fleet::view::heartbeat(fleet.clone(), local.to_string(), counts));
        }
        let (directory_stop, directory_stopped) = tokio::sync::oneshot::channel::<()>();
        let directory_task = match directory_listener {
            Some((listener, signer)) => {
                let directory_local = listener.local_addr()?;
                guard.add_own_listener(directory_local);
                eprintln!("robots-proxy key directory listening on {directory_local}");
                let stopped = async move {
                    let _ = directory_stopped.await;
                };
                let pages = disclosure.clone() as Arc<dyn robots_proxy::signing::directory::Pages>;
                let serving = robots_proxy::signing::directory::serve_with(
                    listener,
                    signer,
                    clock.clone(),
                    Some(pages),
                    stopped,
                );
                Some(tokio::spawn(serving))
            }
            None => None,
        };
        eprintln!("robots-proxy listening on {local}");
        if let Some(tls) = &tls_listener {
            let tls_local = tls.listener.local_addr()?;
            guard.add_own_listener(tls_local);
            eprintln!("robots-proxy TLS listening on {tls_local}");
        }
        eprintln!("robots-proxy admin listening on {admin_local}");
        tracing::info!(
            listen = %local, admin = %admin_local, audit = %audit_path.display(),
            "robots-proxy started"
        );

        let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
        let admin_task = {
            let section = config.admin.clone();
            let proxy = proxy.clone();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = admin_stopped.await;
                };
                robots_proxy::admin::serve_with(admin_listener, proxy, &section, stopped).await;
            })
        };

        // `[[exceptions]]` expiring within seven days: a warning once a day each (checked
        // hourly, and after every reload).
        let expiring = proxy.clone();
        let expiry_task = tokio::spawn(async move {
            let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
            loop {
                hourly.tick().await;
                let _ = expiring.policy().exceptions().warn_expiring(expiring.clock().now());
            }
        });
        let grace = config.proxy.shutdown_grace;
        let reloading = proxy.clone();
        let hup_task = tokio::spawn(async move {
            while hup.recv().await.is_some() {
                reload(&sources, &config, &reloading, &disclosure).await;
            }
        });
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int.recv() => tracing::info!("SIGINT: stopping"),
            }
            tell_systemd("STOPPING=1\nSTATUS=draining connections");
        };
        tell_systemd(&format!("READY=1\nSTATUS=proxy on {local}, admin on {admin_local}"));
        proxy.serve_with_tls(listener, tls_listener, shutdown, grace).await;
        hup_task.abort();
        expiry_task.abort();
        let _ = admin_stop.send(());
        let _ = admin_task.await;
        let _ = directory_stop.send(());
        if let Some(task) = directory_task {
            let _ = task.await;
        }
        audit.close().await.context("cannot flush the audit log")?;
        tracing::info!("robots-proxy stopped");
        Ok(())
    }

    /// The port the default fleet instance name carries: `proxy.listen`'s, or the process id
    /// when the port is chosen by the system (0), so two such instances on one host differ.
    fn fleet_port(config: &Config) -> u16 {
        match config.proxy.listen.port() {
            0 => u16::try_from(std::process::id() % 65_536).unwrap_or(0),
            port => port,
        }
    }

    /// On SIGHUP: reopens the audit log, then reads the configuration again and applies what
    /// can change while running (see `config::RELOADABLE`). A configuration with any error is
    /// refused as a whole and the running one stays. Changes to other keys are logged as
    /// needing a restart; `started` is the configuration the process started with, which those
    /// keys still have.
    async fn reload(sources: &Sources, started: &Config, proxy: &Proxy, disclosure: &Disclosure) {
        // Log rotation sends SIGHUP too: the file is reopened whatever the new configuration.
        match proxy.audit().reopen().await {
            Ok(()) => tracing::info!("SIGHUP: audit log reopened"),
            Err(e) => tracing::error!(error = %e, "SIGHUP: cannot reopen the audit log"),
        }
        // The users file too, whatever the configuration: removing a line revokes a user.
        match proxy.reload_users() {
            None => {}
            Some(Ok(path)) => {
                tracing::info!(file = %path.display(), "SIGHUP: users file reloaded")
            }
            Some(Err(e)) => tracing::error!(
                error = %e,
                "SIGHUP: the users file is refused; the running users stay"
            ),
        }
        let refused = |error: &dyn std::fmt::Display| {
            tracing::error!(
                error = %error,
                "SIGHUP: the new configuration is refused; the running configuration stays"
            );
            proxy.metrics().reloaded(false);
        };
        // The same checks as at start: a reload refuses exactly what `serve` would.
        let new = match sources.load_checked() {
            Ok(config) => config,
            Err(e) => return refused(&e),
        };
        // Everything that can fail is checked before anything is applied.
        let rust_log = std::env::var("RUST_LOG").ok();
        if let Err(e) = robots_proxy::logging::filter(&new.log, rust_log.as_deref()) {
            return refused(&e);
        }
        if let Err(e) = proxy.reload(&new) {
            return refused(&e);
        }
        if let Err(e) = proxy.audit().reconfigure(&new.audit).await {
            tracing::error!(error = %e, "SIGHUP: cannot apply the audit options");
        }
        if let Err(e) = robots_proxy::logging::set_filter(&new.log, rust_log.as_deref()) {
            tracing::error!(error = %e, "SIGHUP: cannot apply log.level");
        }
        let restart = config::needs_restart(started, &new);
        if !restart.is_empty() {
            tracing::warn!(
                keys = %restart.join(", "),
                "SIGHUP: these changes take effect only after a restart; the running values stay"
            );
        }
        // What is in force: [robots] and [pacing] as started (they need a restart), the rest
        // from the new configuration ([signing] too, whether or not it is reloaded itself).
        let inputs = robots_proxy::disclosure::Inputs {
            robots: &started.robots,
            pacing: &started.pacing,
            ..new.disclosure_inputs()
        };
        if let Err(e) = disclosure.update(&inputs, &new.state_dir, SystemTime::now()) {
            tracing::error!(error = %e, "SIGHUP: the crawler disclosure is not up to date");
        }
        proxy.metrics().reloaded(true);
        let _ = proxy.policy().exceptions().warn_expiring(proxy.clock().now());
        tracing::info!(exceptions = new.exceptions.len(), "SIGHUP: configuration reloaded");
    }
}

fn run_check(args: CheckArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    if args.jsonl {
        let stdin = io::stdin();
        let mut input = io::BufReader::with_capacity(64 * 1024, stdin.lock());
        let defaults = check::JsonlDefaults { agent: args.agent, purposes: args.purpose };
        return match check::check_jsonl(&mut input, &mut out, &defaults) {
            Ok(summary) => ExitCode::from(summary.exit_status()),
            Err(e) => {
                eprintln!("robots-proxy check: {e}");
                ExitCode::from(2)
            }
        };
    }
    let agent = match args.agent.as_deref() {
        None => None,
        Some(text) => match ProductToken::from_token_or_user_agent(text) {
            Some(token) => Some(token),
            None => {
                eprintln!(
                    "robots-proxy check: note: no product token found in {text:?}; \
                     only the `*` groups apply"
                );
                None
            }
        },
    };
    let Some(path) = args.robots else {
        eprintln!("robots-proxy check: --robots FILE is required");
        return ExitCode::from(2);
    };
    if let Some(note) = check::size_note(&path) {
        eprintln!("robots-proxy check: note: {note}");
    }
    let result = check::read_robots(&path).and_then(|robots| {
        check::check_urls_as(
            &robots,
            agent.as_ref(),
            &args.purpose,
            &args.urls,
            args.explain,
            args.as_proxy,
            &mut out,
        )
    });
    let flushed = out.flush();
    match (result, flushed) {
        (Ok(Outcome::AllAllowed), Ok(())) => ExitCode::SUCCESS,
        (Ok(_), Ok(())) => ExitCode::from(1),
        (Err(e), _) => {
            eprintln!("robots-proxy check: {e}");
            ExitCode::from(2)
        }
        (_, Err(e)) => {
            eprintln!("robots-proxy check: cannot write output: {e}");
            ExitCode::from(2)
        }
    }
}

/// `robots-proxy health`: an HTTP/1.1 probe with hyper's client, so that a container image
/// without a shell or curl (distroless) can still have a `HEALTHCHECK`.
#[path = "main/health.rs"]
mod health;

/// The TLS listener for clients (`proxy.tls_listen`), bound, with its certificate, key and
/// client certificate verification loaded.
fn tls_listener(
    config: &robots_proxy::config::Config,
    addr: std::net::SocketAddr,
    backlog: u32,
) -> anyhow::Result<robots_proxy::proxy::TlsListener> {
    use anyhow::Context as _;
    use robots_proxy::tls::listener::{listener_config, ListenerFiles};
    // Config::validate has checked that both are set with proxy.tls_listen.
    let (Some(certificate), Some(key)) = (&config.proxy.tls_certificate, &config.proxy.tls_key)
    else {
        anyhow::bail!("proxy.tls_listen needs proxy.tls_certificate and proxy.tls_key");
    };
    let files = ListenerFiles {
        certificate,
        key,
        client_ca: config.access.client_ca.as_deref(),
        require_client_certificate: config.access.client_certificate
            == robots_proxy::access::ClientCertificate::Required,
    };
    let tls = listener_config(files)?;
    let listener = listen(addr, backlog)
        .with_context(|| format!("cannot listen on {addr} (proxy.tls_listen)"))?;
    Ok(robots_proxy::proxy::TlsListener { listener, config: tls })
}

/// A listener on `addr` with a listen queue of `backlog` connections.
fn listen(addr: std::net::SocketAddr, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As std and tokio do: a restarted proxy can listen again at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}
