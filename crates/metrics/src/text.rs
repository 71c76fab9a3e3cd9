//! The two exposition formats `/metrics` speaks, chosen by the scraper's `Accept` header:
//! OpenMetrics 1.0 (`application/openmetrics-text`), which `prometheus-client` writes, and the
//! classic Prometheus text format (`text/plain; version=0.0.4`), for scrapers and tools that
//! ask for it or ask for nothing in particular (`curl`, `promtool check metrics`).
//!
//! The classic format is the OpenMetrics text with what it does not have taken out or renamed
//! (the sample lines are the same in both):
//! * no `# EOF` and no `# UNIT` lines;
//! * a counter's `# HELP` / `# TYPE` name its samples' name, with `_total`;
//! * an `info` metric is a `gauge` named `<name>_info`, as its one sample is;
//! * `unknown` is `untyped`.

/// The media type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The media type of the classic Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a scraper whose `Accept` header is `accept` takes OpenMetrics: it lists
/// `application/openmetrics-text` with a weight above zero. Prometheus does by default; a
/// request without `Accept`, or one for `text/plain`, gets the classic format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let weight = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        media.eq_ignore_ascii_case("application/openmetrics-text") && weight > 0.0
    })
}

/// The classic Prometheus text format of an OpenMetrics exposition.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    // The metric families' types, by name, from their `# TYPE` lines.
    let types: std::collections::HashMap<&str, &str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .collect();
    let renamed = |name: &str| -> String {
        match types.get(name).copied() {
            Some("counter") if !name.ends_with("_total") => format!("{name}_total"),
            Some("info") => format!("{name}_info"),
            _ => name.to_owned(),
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((name, help)) = line.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')) {
            out.push_str(&format!("# HELP {} {help}\n", renamed(name)));
        } else if let Some((name, kind)) =
            line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
        {
            let kind = match kind {
                "info" => "gauge",
                "unknown" => "untyped",
                other => other,
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_accept_header() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,\
                          text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(wants_openmetrics(Some("application/openmetrics-text")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text; q=0")));
        assert!(!wants_openmetrics(Some("text/plain; version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
    }

    #[test]
    fn counters_and_infos_are_renamed_and_eof_goes() {
        let om = "# HELP a_requests Requests.\n# TYPE a_requests counter\n\
                  a_requests_total{x=\"1\"} 3\n# HELP a_build Build.\n# TYPE a_build info\n\
                  a_build_info{version=\"1\"} 1\n# HELP a_up Up.\n# TYPE a_up gauge\n\
                  # UNIT a_up seconds\na_up 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_requests_total Requests.\n# TYPE a_requests_total counter\n\
             a_requests_total{x=\"1\"} 3\n# HELP a_build_info Build.\n# TYPE a_build_info gauge\n\
             a_build_info{version=\"1\"} 1\n# HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n"
        );
    }
}
