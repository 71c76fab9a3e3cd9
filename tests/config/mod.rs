//! Integration tests for configuration loading, the audit writer and logging set-up: one test
//! binary, one module per area.

mod audit;
pub mod bounds;
mod env;
mod file;
mod logging;
mod pacing;
pub(crate) mod shipped;
mod validate;

use std::path::{Path, PathBuf};

use robots_proxy::config::{self, Config, ConfigError, ConfigSources, Overrides};

/// Writes `text` to `name` in `dir` and returns the path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

/// Sources from an optional file and environment pairs.
fn sources(file: Option<&Path>, env: &[(&str, &str)]) -> ConfigSources {
    ConfigSources {
        file: file.map(Path::to_owned),
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        overrides: Overrides::default(),
    }
}

fn load_ok(sources: ConfigSources) -> Config {
    match config::load(sources) {
        Ok(config) => config,
        Err(e) => panic!("expected the configuration to load, got: {e}"),
    }
}

fn load_err(sources: ConfigSources) -> ConfigError {
    match config::load(sources) {
        Ok(config) => panic!("expected an error, got {config:?}"),
        Err(e) => e,
    }
}
