//! Integration tests of the robots.txt engine and of `robots-proxy check`.
//!
//! One test binary (one link step, one process) with a module per concern:
//!
//! * `spec_tables`: every row of the Parsing / Choosing the group / Matching tables of
//!   `shared/spec/README.md`, and RFC 9309's percent-encoding table;
//! * `google`: the examples of Google's "How Google interprets the robots.txt specification" and
//!   the behaviours pinned by Google's own robots.txt parser test suite;
//! * `pathological`: inputs built to be slow or deep (checked for correctness only; speed is the
//!   benchmark's business);
//! * `properties`: proptest properties (never panics, idempotent normalisation, monotonicity);
//! * `fixtures`: real robots.txt files from `tests/fixtures/robots/`;
//! * `differential`: agreement with the `texting_robots` and `robotstxt` crates, every accepted
//!   difference named and explained;
//! * `check_cli`: the `check` command as a process (exit codes, messages, `--explain`, `--jsonl`);
//! * `heap`: what a compiled robots.txt keeps on the heap, against the cache's weight of it;
//! * `decoded`: patterns read decoded, for the readings other than the path as sent;
//! * `fuzz`: the fuzz targets' invariants (the files `fuzz/fuzz_targets/` call) run on a corpus.

mod check_cli;
mod decoded;
mod differential;
mod fixtures;
mod fuzz;
mod google;
mod heap;
mod pathological;
mod properties;
mod spec_tables;
mod usage;
mod util;
