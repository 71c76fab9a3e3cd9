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
    /// Manage proxy users (access.users_file).
    #[command(subcommand)]
    User(UserCommand),
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
    /// and print the effective result. Exit 1 with a message naming the key on any error.
    Check {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
        /// Address to listen on (overrides `proxy.listen`).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
    },
}

#[derive(Subcommand)]
enum CaCommand {
    /// Write a new CA certificate (ca.pem) and key (ca-key.pem, mode 0600).
    Init {
        /// Directory to write into (default: `ca/` under the state directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on (overrides `proxy.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
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
    /// Read JSON lines on standard input, each
    /// `{"robots": "<body>" | "robots_file": "<path>", "agent": "...", "url": "..."}`, and write
    /// one JSON answer per line: `{"allowed": bool, "line": N|null, "rule": "..."|null}`, or
    /// `{"error": "..."}` for a bad line.
    #[arg(long, conflicts_with_all = ["robots", "urls", "explain"])]
    jsonl: bool,
    /// Absolute URLs to check.
    #[arg(value_name = "URL", required_unless_present = "jsonl")]
    urls: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(args),
        Command::Ca(CaCommand::Init { dir }) => {
            let dir =
                dir.unwrap_or_else(|| robots_proxy::config::Config::default().state_dir.join("ca"));
            let files = robots_proxy::tls::ca::CaFiles::in_dir(&dir);
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
        Command::Config(ConfigCommand::Check { config, listen }) => {
            match serve::load(config, listen) {
                Ok(config) => {
                    print!("{}", robots_proxy::config::render(&config));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy config check: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Serve(args) => match serve::run(args.config, args.listen) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("robots-proxy serve: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}

mod serve {
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::sync::Arc;

    use anyhow::Context;
    use tokio::signal::unix::{signal, SignalKind};

    use robots_proxy::audit::AuditLog;
    use robots_proxy::cache::RobotsCache;
    use robots_proxy::clock::{Clock, SystemClock};
    use robots_proxy::config::{self, Config, ConfigSources, Overrides};
    use robots_proxy::proxy::Proxy;
    use robots_proxy::tls::ca::{self, CaFiles, CertificateAuthority};
    use robots_proxy::tls::HttpsMode;

    /// Loads the layered configuration: defaults, file, environment, flags.
    pub(crate) fn load(
        config: Option<PathBuf>,
        listen: Option<SocketAddr>,
    ) -> anyhow::Result<Config> {
        let sources =
            ConfigSources::from_process_env(config, Overrides { listen, ..Default::default() });
        Ok(config::load(sources)?)
    }

    pub(crate) fn run(config: Option<PathBuf>, listen: Option<SocketAddr>) -> anyhow::Result<()> {
        let config = load(config, listen)?;
        robots_proxy::logging::init(&config.log)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        runtime.block_on(serve(config))
    }

    async fn serve(config: Config) -> anyhow::Result<()> {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let tls = robots_proxy::tls::client_config(config.https.upstream_ca_file.as_deref())?;
        // The robots.txt fetcher connects through the destination guard too (SSRF).
        let guard = Arc::new(robots_proxy::guard::DestinationGuard::from_config(&config));
        let connector =
            robots_proxy::tls::https_connector(tls, config.robots.connect_timeout, guard);
        let cache =
            Arc::new(RobotsCache::with_connector(config.robots.clone(), clock.clone(), connector));
        let audit_path = config.audit_path();
        let audit = AuditLog::open(audit_path.clone(), config.audit.clone())
            .with_context(|| format!("cannot open the audit log {}", audit_path.display()))?;
        let ca = if config.https.mode == HttpsMode::Intercept {
            let dir = config.state_dir.join("ca");
            let files = CaFiles {
                cert: config.https.ca_cert.clone().unwrap_or_else(|| dir.join(ca::CA_CERT_FILE)),
                key: config.https.ca_key.clone().unwrap_or_else(|| dir.join(ca::CA_KEY_FILE)),
            };
            let (authority, created) = CertificateAuthority::load_or_create(&files)
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
        let proxy = Proxy::new(&config, cache, audit.clone(), clock, ca)?;
        let listener = tokio::net::TcpListener::bind(config.proxy.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.proxy.listen))?;
        let local = listener.local_addr()?;
        eprintln!("robots-proxy listening on {local}");
        tracing::info!(listen = %local, audit = %audit_path.display(), "robots-proxy started");

        // SIGHUP: reopen the audit log (logrotate). SIGTERM / SIGINT: stop gracefully.
        let mut hup = signal(SignalKind::hangup())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let reopen_audit = audit.clone();
        let hup_task = tokio::spawn(async move {
            while hup.recv().await.is_some() {
                match reopen_audit.reopen().await {
                    Ok(()) => tracing::info!("SIGHUP: audit log reopened"),
                    Err(e) => tracing::error!(error = %e, "SIGHUP: cannot reopen the audit log"),
                }
            }
        });
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int.recv() => tracing::info!("SIGINT: stopping"),
            }
        };
        proxy.serve(listener, shutdown, config.proxy.shutdown_grace).await;
        hup_task.abort();
        audit.close().await.context("cannot flush the audit log")?;
        tracing::info!("robots-proxy stopped");
        Ok(())
    }
}

fn run_check(args: CheckArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    if args.jsonl {
        let stdin = io::stdin();
        let mut input = io::BufReader::with_capacity(64 * 1024, stdin.lock());
        return match check::check_jsonl(&mut input, &mut out) {
            Ok(_) => ExitCode::SUCCESS,
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
    let result = check::read_robots(&path).and_then(|robots| {
        check::check_urls(&robots, agent.as_ref(), &args.urls, args.explain, &mut out)
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
