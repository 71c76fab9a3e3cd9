//! Fuzz target `user_agent`: its invariants are in `tests/engine/fuzz/user_agent.rs`, shared with the
//! ordinary test that runs them on a corpus (`cargo test --test main engine::fuzz`).
#![no_main]

#[path = "../../tests/engine/fuzz/user_agent.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| invariants::check(data));
