//! The `audit_cosignature` record: a witness's cosignature of a checkpoint, appended to the log
//! by the writer like every record (so it is in the chain, and the next checkpoint covers it).
//! Its fields are documented in `docs/audit.md` ("Witnesses").

use super::{Witness, Written};

/// The `audit_cosignature` line (newline included, without the chain's members) for the
/// cosignature `signature` (a note signature line, newline included) of `checkpoint` by
/// `witness`, made at `time` (POSIX seconds).
pub(crate) fn line(
    witness: &Witness,
    checkpoint: &Written,
    signature: &str,
    time: u64,
    node: Option<&str>,
) -> Vec<u8> {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(time);
    let cosigned_at = crate::timestamp(at);
    let name = witness.key.name();
    let mut record = serde_json::Map::new();
    let mut put = |k: &str, value: serde_json::Value| {
        record.insert(k.to_owned(), value);
    };
    put("@timestamp", crate::timestamp(std::time::SystemTime::now()).into());
    put("event.action", "audit_cosignature".into());
    put("event.outcome", "success".into());
    put(
        "event.reason",
        format!(
            "witness {name} cosigned the checkpoint of {} at tree size {} ({cosigned_at})",
            checkpoint.origin, checkpoint.size
        )
        .into(),
    );
    put("audit.cosignature.witness", name.into());
    put("audit.cosignature.url", witness.url.as_str().into());
    put("audit.cosignature.key", witness.key.to_string().into());
    put("audit.cosignature.time", cosigned_at.into());
    put("audit.cosignature.origin", checkpoint.origin.as_str().into());
    put("audit.cosignature.tree_size", checkpoint.size.into());
    put("audit.cosignature.root", super::merkle::encode(&checkpoint.root).into());
    put("audit.cosignature.checkpoint_sequence", checkpoint.sequence.into());
    put("audit.cosignature.note", format!("{}{signature}", checkpoint.note).into());
    crate::close_record(record, node)
}

/// The members of an `audit_cosignature` record that `audit verify` and `audit prove` use.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Cosignature {
    /// `audit.cosignature.witness`.
    #[serde(rename = "audit.cosignature.witness")]
    pub witness: String,
    /// `audit.cosignature.note`: the checkpoint with the witness's signature line.
    #[serde(rename = "audit.cosignature.note")]
    pub note: String,
    /// `audit.cosignature.checkpoint_sequence`.
    #[serde(rename = "audit.cosignature.checkpoint_sequence")]
    pub checkpoint_sequence: u64,
}

impl Cosignature {
    /// The record's members, when `line` is an `audit_cosignature` record.
    pub fn parse(line: &[u8]) -> Option<Cosignature> {
        #[derive(serde::Deserialize)]
        struct Action {
            #[serde(rename = "event.action")]
            action: Option<String>,
        }
        let a: Action = serde_json::from_slice(line).ok()?;
        if a.action.as_deref() != Some("audit_cosignature") {
            return None;
        }
        serde_json::from_slice(line).ok()
    }

    /// The note's text (three lines, final newline included) and its signature lines.
    pub fn split(&self) -> Option<(&str, Vec<&str>)> {
        let at = self.note.rfind("\n\n")?;
        Some((&self.note[..at + 1], self.note[at + 2..].lines().collect()))
    }

    /// The signature lines of the note that are not the log's own (the key name of the log's
    /// signature is the origin).
    pub(crate) fn witness_lines(&self) -> Vec<&str> {
        let Some((text, lines)) = self.split() else { return Vec::new() };
        let origin = text.split('\n').next().unwrap_or("");
        let own = format!("\u{2014} {origin} ");
        lines.into_iter().filter(|l| !l.starts_with(&own)).collect()
    }
}
