//! Units the configuration is written in, shared by the sections of several modules, and what
//! every section's `TryFrom<Raw…>` needs: its error, [`Problems`], and the [`bounds`] of its
//! durations, sizes and counts. A leaf: it reaches nothing else of the crate.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod bounds;
mod problems;
pub use problems::Problems;

/// A size in bytes, written as a number or the human way (`"500KiB"`, `"256MiB"`).
///
/// Shown (and serialised) in the largest binary unit that divides it exactly, so `render` gives
/// back what an operator would write.
///
/// Not `bytesize::ByteSize` nor `ubyte::ByteUnit`: bytesize reads a bare `k`/`m`/`g` as powers
/// of ten (here `64k` is 64 KiB) and multiplies through `f64`, so an overflowing size silently
/// becomes `u64::MAX` instead of an error; ubyte refuses a bare `k` outright and its errors are
/// a position, not a message; both accept fractions (`1.5MiB`), and bytesize displays
/// `500.0 KiB`, which would change every validation message and rendered configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(b: ByteSize) -> u64 {
        b.0
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 != 0 && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Number(n)) => Ok(ByteSize(n)),
            Ok(Raw::Text(t)) => t.parse().map_err(serde::de::Error::custom),
            Err(_) => Err(serde::de::Error::custom(
                "expected a size: a number of bytes or a string like \"500KiB\"",
            )),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size like \"500KiB\""))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kib" | "k" => 1 << 10,
            "mib" | "m" => 1 << 20,
            "gib" | "g" => 1 << 30,
            "kb" => 1000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            other => {
                return Err(format!("unknown size unit {other:?} in {s:?} (use B, KiB, MiB, GiB)"))
            }
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("{s:?} is too large"))
    }
}
