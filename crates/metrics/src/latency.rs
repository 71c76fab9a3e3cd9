//! [`LatencyHistogram`]: a latency histogram with fixed buckets, recorded with atomics only.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;

/// Upper bounds of the latency buckets, in seconds: from 50 µs (a cached decision) to 30 s (a
/// slow origin or a robots.txt fetch that times out).
const LATENCY_BUCKETS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 30.0,
];

/// A latency histogram with fixed buckets, recorded with atomics only.
///
/// Cheap to clone (the buckets are shared). The sum is kept in nanoseconds, so it is exact and
/// needs no floating-point atomics.
#[derive(Clone)]
pub struct LatencyHistogram {
    inner: Arc<HistogramInner>,
}

struct HistogramInner {
    /// Bucket bounds in nanoseconds, the same as [`LATENCY_BUCKETS`].
    bounds: [u64; LATENCY_BUCKETS.len()],
    /// Observations per bucket (not cumulative); the last slot is above every bound.
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        let bounds = LATENCY_BUCKETS.map(|s| (s * 1e9).round() as u64);
        LatencyHistogram {
            inner: Arc::new(HistogramInner {
                bounds,
                counts: std::array::from_fn(|_| AtomicU64::new(0)),
                sum_nanos: AtomicU64::new(0),
            }),
        }
    }
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let slot =
            self.inner.bounds.iter().position(|&b| nanos <= b).unwrap_or(self.inner.bounds.len());
        self.inner.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.inner.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram").field("count", &self.count()).finish_non_exhaustive()
    }
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        let counts: Vec<u64> =
            self.inner.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let count = counts.iter().sum();
        let sum = self.inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(counts)
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            sum,
            count,
            &buckets,
            None::<&HashMap<usize, Exemplar<NoLabelSet, f64>>>,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
