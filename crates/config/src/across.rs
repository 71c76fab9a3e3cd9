//! The rules between sections: one section's value against another's. Every other rule lives
//! with its section, in the section's `TryFrom<Raw…>`; these need two sections at once, so the
//! configuration checks them, here and nowhere else, on the raw sections (before any of them
//! is converted, so that they are checked even when a section has problems of its own).

use robots_proxy_units::Problems;

use super::RawConfig;

/// Every rule between sections that `raw` breaks.
pub(super) fn problems(raw: &RawConfig) -> Problems {
    let mut problems = Problems::new();
    let p = &raw.proxy.0;
    let admin = &raw.admin.0;
    // The listeners: each needs its own port (port 0, any free port, is never shared).
    problems.need(admin.listen != p.listen || p.listen.port() == 0, "admin.listen", || {
        format!("{} is also proxy.listen; the two need their own ports", p.listen)
    });
    if let Some(tls) = p.tls_listen {
        let taken = tls.port() != 0 && (tls == p.listen || tls == admin.listen);
        problems.need(!taken, "proxy.tls_listen", || {
            format!("{tls} is also proxy.listen or admin.listen; each listener needs its own port")
        });
    }
    if let Some(directory) = raw.signing.0.directory_listen {
        let taken = [p.listen, admin.listen];
        problems.need(
            directory.port() == 0 || !taken.contains(&directory),
            "signing.directory_listen",
            || format!("{directory} is also proxy.listen or admin.listen; it needs its own port"),
        );
    }
    // The archive keeps robots.txt bodies of at most robots.max_body.
    let (archive, max_body) = (&raw.archive.0, raw.robots.0.max_body);
    problems.need(
        archive.max_bytes.0 == 0 || archive.max_bytes >= max_body,
        "archive.max_bytes",
        || {
            format!(
                "{} cannot hold even one robots.txt of robots.max_body ({}); 0 means no bound",
                archive.max_bytes, max_body
            )
        },
    );
    // Client certificates are asked for on the TLS listener.
    problems.need(
        raw.access.0.client_ca.is_none() || p.tls_listen.is_some(),
        "access.client_ca",
        || {
            "client certificates are asked for on the TLS listener only: set proxy.tls_listen"
                .into()
        },
    );
    // The disclosure is served on the key directory listener.
    problems.need(
        !raw.disclosure.0.enabled || raw.signing.0.directory_listen.is_some(),
        "disclosure.enabled",
        || {
            "the disclosure is served on the key directory listener: set \
             signing.directory_listen (and signing.keys)"
                .into()
        },
    );
    problems
}
