//! Fuzz target `request_path`: its invariants are in `tests/engine/fuzz/request_path.rs`, shared with the
//! ordinary test that runs them on a corpus (`cargo test --test main engine::fuzz`).
#![no_main]

#[path = "../../tests/engine/fuzz/request_path.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::check(data));
