//! The `robots-proxy` command line.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

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
