//! The `robots-proxy` command line.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// mimalloc: the proxy allocates small, short-lived buffers per request on every worker thread,
/// where glibc's allocator spends a measurable share of the CPU (see docs/benchmarks.md;
/// on `many`, 0.76x the bare proxy with glibc's against 0.98x with mimalloc, 2026-11-26).
/// Its huge-page hints apply only with `limits.transparent_huge_pages = true`; by default the
/// process turns huge pages off (`serve::run`).
/// The `system-allocator` feature leaves it out, for heap profilers that follow `malloc`
/// (heaptrack, valgrind's massif); never for a build that is shipped.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use robots_proxy::check::{self, Outcome};
use robots_proxy::output::{terminal, terminal_text};
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
    /// Reload the running proxy's configuration (`POST /api/reload` on its admin listener),
    /// as SIGHUP does, and print what became of it.
    ///
    /// Exit status: 0 when the new configuration was applied, 1 when it was refused (the
    /// running one stays: every error is listed) or the proxy cannot be reached.
    Reload {
        /// Configuration file (TOML), to find `admin.listen`.
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
        /// The admin listener's URL (`http://127.0.0.1:9090`). Default: the configured
        /// `admin.listen`.
        #[arg(long, value_name = "URL")]
        admin: Option<String>,
        /// Print the report as JSON, as the admin listener gives it.
        #[arg(long)]
        json: bool,
    },
    /// Manage proxy users (access.users_file).
    #[command(subcommand)]
    User(UserCommand),
    /// Manage the fleet's key, which seals the records instances share through Redis
    /// (fleet.key_file).
    #[command(subcommand)]
    Fleet(FleetCommand),
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
enum FleetCommand {
    /// The fleet's sealing key.
    #[command(subcommand)]
    Key(FleetKeyCommand),
}

#[derive(Subcommand)]
enum FleetKeyCommand {
    /// Write a new random fleet key to FILE (mode 0600; never over an existing file). Give the
    /// same file to every instance as fleet.key_file; while changing keys, the old one as
    /// fleet.previous_key_file.
    ///
    /// Exit status: 0 when written, 1 otherwise.
    New {
        /// Where to write the key.
        file: PathBuf,
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
        /// Instead, ask the running proxy what a reload would do now (its admin listener's
        /// `GET /api/reload/preview`): the changes it would apply, those that need a restart
        /// and why, or every error for which it would be refused. Nothing is applied. Exit 0
        /// when a reload would be accepted, 1 otherwise.
        #[arg(long)]
        against_running: bool,
        /// With --against-running: the admin listener's URL (`http://127.0.0.1:9090`).
        /// Default: the configured `admin.listen`.
        #[arg(long, value_name = "URL", requires = "against_running")]
        admin: Option<String>,
        /// With --against-running: print the report as JSON, as the admin listener gives it.
        #[arg(long, requires = "against_running")]
        json: bool,
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
                        "Trust the certificate in your crawlers; see docs/https.md, \"Trusting the CA\"."
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
        Command::Fleet(FleetCommand::Key(FleetKeyCommand::New { file })) => {
            match robots_proxy::fleet::seal::FleetKey::create(&file) {
                Ok(()) => {
                    println!(
                        "{}",
                        terminal(&format!("wrote a new fleet key to {}", file.display()))
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy fleet key new: {}", terminal(&e.to_string()));
                    ExitCode::from(1)
                }
            }
        }
        Command::Health(args) => health::run(args),
        Command::Reload { config, admin, json } => {
            running::reload(config, admin, json, std::time::Duration::from_secs(30))
        }
        Command::Evidence(command) => robots_proxy::evidence::run(*command),
        Command::Keys(command) => robots_proxy::signing::commands::run(command, &|file| {
            serve::load(file, None, None)
                .map(|config| (config.signing, config.state_dir))
                .map_err(|e| describe(&e))
        }),
        Command::Audit(command) => robots_proxy::audit::commands::run(command, &|file| {
            serve::load(file, None, None).map(|config| config.audit).map_err(|e| describe(&e))
        }),
        Command::Config(ConfigCommand::Check {
            config,
            against_running: true,
            admin,
            json,
            ..
        }) => running::run(config, admin, json, std::time::Duration::from_secs(30)),
        Command::Config(ConfigCommand::Check { config, listen, admin_listen, .. }) => {
            match serve::check(config, listen, admin_listen) {
                Ok(config) => {
                    print!("{}", terminal_text(&robots_proxy::config::render(&config)));
                    // What the audit log's lifecycle records name (`audit.config.sha256`).
                    println!("# configuration sha256 (audit.config.sha256): {}", config.digest());
                    // What each exception covers, as comments: the output stays a configuration.
                    for line in robots_proxy::policy::exceptions::describe(&config.exceptions) {
                        println!("# {}", terminal(&line));
                    }
                    // Settings that can never apply, and expired exceptions: comments too,
                    // and on stderr for a person.
                    for line in config.warnings(std::time::SystemTime::now()) {
                        let line = terminal(&line);
                        println!("# {line}");
                        eprintln!("robots-proxy config check: {line}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("robots-proxy config check: {}", terminal(&describe(&e)));
                    ExitCode::from(1)
                }
            }
        }
        Command::Serve(args) => {
            let file = args.config.clone();
            match serve::run(args.config, args.listen, args.admin_listen) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    // In the log's format: with `log.format = "json"` a fatal error at start is
                    // a JSON line too, also when the configuration did not load.
                    let format = robots_proxy::logging::format_now(file.as_deref());
                    let message = format!("robots-proxy serve: {}", describe(&e));
                    let target = "robots_proxy::serve";
                    robots_proxy::logging::line(format, tracing::Level::ERROR, target, &message);
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// `serve`: the composition root, and the configuration sources `config check` shares.
#[path = "main/serve.rs"]
mod serve;

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
                eprintln!("robots-proxy check: {}", terminal(&e.to_string()));
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
        eprintln!("robots-proxy check: note: {}", terminal(&note));
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
            eprintln!("robots-proxy check: {}", terminal(&e.to_string()));
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

/// `robots-proxy config check --against-running`: what a reload of the running proxy would do.
#[path = "main/running.rs"]
mod running;
