//! The status page's charts: the sampler that feeds the ring buffer of
//! [`robots_proxy_metrics::series`] every `admin.chart_interval`, and `GET /api/series`, which the page
//! draws from.

use std::time::Duration;

use http::{Response, StatusCode};
use serde_json::json;

use super::{json_response, Body};
use robots_proxy_decide::FetchClass;
use robots_proxy_proxy::Proxy;

/// Samples the counters every `interval` for as long as it runs, the first at once (the
/// counters start at zero, so the first sample holds what happened since the start). Memory is
/// bounded by the ring buffer; nothing is stored elsewhere.
pub(super) async fn sample(proxy: Proxy, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let stats = proxy.policy().store_stats().await.counters;
        proxy.metrics().sample_charts(FetchClass::ALL.map(|c| stats.fetches(c)));
    }
}

/// `GET /api/series`: the samples, oldest first, with their totals and the interval.
pub(super) fn series(proxy: &Proxy, interval: Duration) -> Response<Body> {
    let series = proxy.metrics().series();
    json_response(
        StatusCode::OK,
        &json!({
            "interval_seconds": interval.as_secs_f64(),
            "capacity": series.capacity,
            "samples": series.samples,
            "window": series.window,
        }),
    )
}
