//! The witnesses' metric (`robots_proxy_audit_witness_pushes_total`), read at scrape time:
//! only with `audit.witnesses`.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

/// Encodes the counts per witness (its key name, pushes cosigned, pushes failed).
pub(super) fn encode(
    encoder: &mut DescriptorEncoder,
    counts: &[(String, u64, u64)],
) -> fmt::Result {
    if counts.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(
        "audit_witness_pushes",
        "Checkpoints pushed to each witness of audit.witnesses, by result: ok (cosigned, the \
         cosignature verified with the witness's key and recorded) or failed (no answer, an \
         error status, or a cosignature that does not verify).",
        None,
        MetricType::Counter,
    )?;
    for (witness, ok, failed) in counts {
        for (result, value) in [("ok", *ok), ("failed", *failed)] {
            let labels = [("witness", witness.as_str()), ("result", result)];
            ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}
