//! Fuzz target `parse_decide`: its invariants are in `tests/engine/fuzz/parse_decide.rs`, shared with the
//! ordinary test that runs them on a corpus (`cargo test --test main engine::fuzz`).
#![no_main]

#[path = "../../tests/engine/fuzz/parse_decide.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::check(data));
