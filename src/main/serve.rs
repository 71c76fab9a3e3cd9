//! `robots-proxy serve`: the composition root. Builds the process's one of everything
//! (clock, TLS client configuration, destination guard, robots cache, audit log, pacer, signer,
//! proxy), binds the listeners and runs them until SIGTERM; SIGHUP and `POST /api/reload` go to
//! [`robots_proxy::reload::Reloader`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};

use robots_proxy::audit::AuditLog;
use robots_proxy::cache::RobotsCache;
use robots_proxy::clock::Clock;
use robots_proxy::config::{self, Config, ConfigSources, Overrides};
use robots_proxy::fleet;
use robots_proxy::notify::notify;
use robots_proxy::proxy::Proxy;
use robots_proxy::reload::{Reloader, Reloads, Trigger};
use robots_proxy::tls::HttpsMode;

/// Where the configuration comes from: the file and flags given at start, with the process
/// environment. Kept, so that a reload reads the same sources again.
#[derive(Clone)]
pub(crate) struct Sources {
    file: Option<PathBuf>,
    overrides: Overrides,
}

impl Sources {
    pub(crate) fn new(
        file: Option<PathBuf>,
        listen: Option<SocketAddr>,
        admin_listen: Option<SocketAddr>,
    ) -> Self {
        Sources { file, overrides: Overrides { listen, admin_listen, ..Default::default() } }
    }

    /// Loads the layered configuration: defaults, file, environment, flags.
    pub(crate) fn load(&self) -> Result<Config, config::ConfigError> {
        config::load(ConfigSources::from_process_env(self.file.clone(), self.overrides.clone()))
    }

    /// [`Sources::load`], then what the configuration needs from the machine (files,
    /// directories; `robots_proxy::preflight`): what `config check`, `serve` and a reload
    /// all refuse alike.
    pub(crate) fn load_checked(&self) -> Result<Config, config::ConfigError> {
        let config = self.load()?;
        robots_proxy::preflight::check(&config)?;
        Ok(config)
    }
}

/// `config check`: the configuration `serve` would run with, refused where `serve` would
/// refuse it.
pub(crate) fn check(
    config: Option<PathBuf>,
    listen: Option<SocketAddr>,
    admin_listen: Option<SocketAddr>,
) -> anyhow::Result<Config> {
    Ok(Sources::new(config, listen, admin_listen).load_checked()?)
}

/// Loads the layered configuration: defaults, file, environment, flags.
pub(crate) fn load(
    config: Option<PathBuf>,
    listen: Option<SocketAddr>,
    admin_listen: Option<SocketAddr>,
) -> anyhow::Result<Config> {
    Ok(Sources::new(config, listen, admin_listen).load()?)
}

/// `limits.transparent_huge_pages = false`, the default: turns transparent huge pages off for
/// this process (`prctl(PR_SET_THP_DISABLE)`, Linux), before the worker threads start.
/// mimalloc asks for huge pages where the kernel offers them (`madvise` or `always`), and a
/// proxy's heap is sparse: pooled connections and cache entries spread over many pages, each
/// of which then counts 2 MiB. With 10,000 sites (`benches/proxy/run.sh`, variant `wide`) the
/// process held 488 MiB with them and 424 MiB without; requests per second on one site and
/// eight did not differ beyond the runs' noise (docs/benchmarks.md, "Memory per site"). Failing (an old
/// kernel) leaves the process as it was.
fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(error = %e, "transparent huge pages could not be turned off");
    }
}

pub(crate) fn run(
    config: Option<PathBuf>,
    listen: Option<SocketAddr>,
    admin_listen: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let sources = Sources::new(config, listen, admin_listen);
    let config = sources.load_checked()?;
    robots_proxy::logging::init(&config.log)?;
    if !config.limits.transparent_huge_pages {
        without_transparent_huge_pages();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(config, sources))
}

/// Tells systemd (`Type=notify`) about the service; not being under systemd is fine.
fn tell_systemd(state: &str) {
    if let Err(e) = notify(state) {
        tracing::warn!(error = %e, state, "cannot notify systemd");
    }
}

async fn serve(config: Config, sources: Sources) -> anyhow::Result<()> {
    // Handlers first: a SIGHUP that arrives once the listening lines are out (a supervisor
    // or test reacting to them) must find a handler, not the default action, which kills.
    // SIGHUP: reload the configuration and reopen the audit log.
    // SIGUSR1: reopen the audit log only (logrotate: a rotation must not apply whatever
    // half-finished edit of the configuration is on disk; review-ops low 10).
    // SIGTERM / SIGINT: stop gracefully.
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let clock: Arc<dyn Clock> = robots_proxy::clock::process_clock();
    // The one TLS client configuration and the one destination guard of the process,
    // shared by the robots.txt fetcher and the proxy (forwards, tunnels): the listeners
    // the guard learns below are refused by every component that connects out (SSRF).
    let tls = Arc::new(robots_proxy::tls::client_config(config.https.upstream_ca_file.as_deref())?);
    let guard = Arc::new(config.destination_guard());
    let connector = robots_proxy::tls::https_connector(
        (*tls).clone(),
        config.robots.connect_timeout,
        guard.clone(),
    );
    let cache =
        Arc::new(RobotsCache::with_connector(config.robots.clone(), clock.clone(), connector));
    // RFC 9309's stale copies and 30-day rule survive a restart (state_dir/robots/); in a
    // fleet the shared store keeps them instead (`cache/persist.rs`). Without this, an instance
    // whose Redis went away read and wrote state_dir/robots/ on the blocking pool for every
    // local fetch, and the threads it started stayed: the fleet soak's RSS step at an outage.
    if !config.fleet.is_enabled() {
        let robots_dir = config.state_dir.join("robots");
        cache
            .persist_in(robots_dir.clone())
            .with_context(|| format!("cannot keep robots.txt state in {}", robots_dir.display()))?;
    }
    // Every robots.txt version decided with, and when each was in force (robots-archive/).
    if config.archive.enabled {
        let archive = robots_proxy::archive::Archive::open(&config.state_dir, &config.archive)
            .context("cannot read the robots.txt archive ([archive])")?;
        cache.archive_to(Arc::new(archive));
    }
    let audit_path = config.audit_path();
    let audit = AuditLog::open(audit_path.clone(), config.audit.clone())
        .with_context(|| format!("cannot open the audit log {}", audit_path.display()))?;
    // Each checkpoint to the witnesses of audit.witnesses, off the request path (a task each).
    audit.start_witnesses((*tls).clone());
    // A `robots_fetch` record for every robots.txt result decided with, whatever
    // `audit.all_decisions` says (docs/audit.md): the log names every version in force.
    let fetches = audit.clone();
    cache.on_result(Arc::new(move |seen| {
        let audit = fetches.clone();
        Box::pin(async move {
            if let Err(error) = audit.record_fetch(&seen).await {
                tracing::debug!(%error, "the robots_fetch record could not be queued");
            }
        })
    }));
    let ca = if config.https.mode == HttpsMode::Intercept {
        // A CA the operator named is loaded, never generated (preflight has checked that
        // its files exist); only the default one under state_dir is made when missing.
        let (files, _) = robots_proxy::preflight::ca_files(&config);
        let (authority, created) = robots_proxy::reload::load_ca(&config)
            .with_context(|| format!("cannot load the CA ({})", files.cert.display()))?;
        if created {
            tracing::warn!(
                cert = %files.cert.display(),
                "created a new CA for HTTPS interception; crawlers must trust this certificate \
                 (curl --cacert, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, NODE_EXTRA_CA_CERTS)"
            );
        }
        announce(
            &config.log,
            format!(
                "robots-proxy HTTPS interception CA: {} (crawlers must trust it)",
                files.cert.display()
            ),
        );
        Some(Arc::new(authority))
    } else {
        None
    };
    // [fleet]: with fleet.redis set, robots.txt and the pace are shared through Redis.
    let fleet = fleet::Fleet::new(&config.fleet, &fleet::view::default_name(fleet_port(&config)))?;
    let pacer = match &fleet {
        None => Arc::new(robots_proxy::pacing::Pacer::new(&config.pacing)?),
        Some(fleet) => {
            cache.share_with(Arc::new(fleet::robots::SharedRedis::with_clock(
                fleet.clone(),
                clock.clone(),
            )));
            let keep = robots_proxy::pacing::idle_after(&config.pacing)?;
            let lease = fleet::pace::slot_lease(config.upstream.response_timeout);
            let store = Arc::new(fleet::pace::RedisPace::new(fleet.clone(), keep, lease));
            audit.set_node_name(fleet.instance());
            tokio::spawn(fleet::robots::follow_purges(fleet.clone(), cache.clone()));
            tracing::info!(
                instance = %fleet.instance(), redis = %fleet.redis_url(),
                on_redis_error = ?config.fleet.on_redis_error,
                "fleet: sharing robots.txt and the pace through Redis"
            );
            Arc::new(robots_proxy::pacing::Pacer::with_store(&config.pacing, store)?)
        }
    };
    let signer = robots_proxy::signing::Signer::new(&config.signing, &config.state_dir)
        .context("cannot set up signing ([signing])")?
        .map(Arc::new);
    let parts = robots_proxy::proxy::ProxyParts {
        fleet: fleet.clone(),
        store: cache.clone(),
        audit: audit.clone(),
        clock: clock.clone(),
        ca,
        guard: guard.clone(),
        tls,
        pacer,
        signer: signer.clone(),
    };
    let proxy = Proxy::new(&config, parts)?;
    // A backlog to match limits.max_connections (the kernel caps it at somaxconn): with
    // tokio's default of 128, a burst of new crawler connections overflowed the queue and
    // waited a second for the SYN to be sent again.
    let backlog = u32::try_from(config.limits.max_connections.clamp(128, 4096)).unwrap_or(1024);
    let listener = listen(config.proxy.listen, backlog)
        .with_context(|| format!("cannot listen on {} (proxy.listen)", config.proxy.listen))?;
    let admin_listener = tokio::net::TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin.listen)", config.admin.listen))?;
    let tls_listener = match config.proxy.tls_listen {
        None => None,
        Some(addr) => Some(tls_listener(&config, addr, backlog)?),
    };
    // The disclosure of the crawlers, on the directory listener; brought up to date here and
    // on every reload (the reloader).
    let disclosure = Arc::new(robots_proxy::disclosure::Disclosure::open(&config.state_dir));
    disclosure.update(
        &config.disclosure_inputs(),
        &config.state_dir,
        std::time::SystemTime::now(),
    )?;
    let directory_listener = match (config.signing.directory_listen, &signer) {
        (Some(addr), Some(signer)) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (signing.directory_listen)"))?;
            Some((listener, Arc::new(arc_swap::ArcSwap::new(signer.clone()))))
        }
        (Some(_), None) => {
            anyhow::bail!("signing.directory_listen is set but signing.keys is empty")
        }
        (None, _) => None,
    };
    let local = listener.local_addr()?;
    let admin_local = admin_listener.local_addr()?;
    // The bound addresses (the real ports, with port 0 configured), before any serves:
    // no listener is ever a destination.
    guard.add_own_listener(local);
    guard.add_own_listener(admin_local);
    if let Some(fleet) = &fleet {
        let metrics = proxy.metrics().clone();
        let counts: fleet::view::Counts = Arc::new(move || metrics.totals());
        let admin = robots_proxy::guard::reachable_at(admin_local);
        let admin = admin.iter().map(ToString::to_string).collect();
        tokio::spawn(fleet::view::heartbeat(fleet.clone(), local.to_string(), admin, counts));
        // The other instances' admin listeners are refused as destinations (review-fleet N10).
        let peers = guard.clone();
        let refuse = Arc::new(move |list| peers.set_peer_listeners(list));
        tokio::spawn(fleet::view::follow_peers(fleet.clone(), refuse));
    }
    // SIGHUP and POST /api/reload: one reloader, one reload at a time.
    let directory_signer = directory_listener.as_ref().map(|(_, signer)| signer.clone());
    let reloader = {
        let sources = sources.clone();
        let load: robots_proxy::reload::Loader = Box::new(move || sources.load_checked());
        Arc::new(Reloader::new(
            load,
            config.clone(),
            proxy.clone(),
            cache.clone(),
            directory_signer,
            disclosure.clone(),
            tls_listener.as_ref().map(|tls| tls.config.clone()),
        ))
    };
    let (directory_stop, directory_stopped) = tokio::sync::oneshot::channel::<()>();
    let directory_task = match directory_listener {
        Some((listener, signer)) => {
            let directory_local = listener.local_addr()?;
            guard.add_own_listener(directory_local);
            announce(
                &config.log,
                format!("robots-proxy key directory listening on {directory_local}"),
            );
            let stopped = async move {
                let _ = directory_stopped.await;
            };
            let pages = disclosure.clone() as Arc<dyn robots_proxy::signing::directory::Pages>;
            // GET /audit/checkpoint (issue 39, item 6), then the disclosure's pages.
            let checkpoint = robots_proxy::audit::CheckpointPage(audit.latest_checkpoint());
            let pages =
                Arc::new(robots_proxy::signing::directory::BothPages(Arc::new(checkpoint), pages))
                    as Arc<dyn robots_proxy::signing::directory::Pages>;
            let serving = robots_proxy::signing::directory::serve_current(
                listener,
                signer,
                clock.clone(),
                Some(pages),
                stopped,
            );
            Some(tokio::spawn(serving))
        }
        None => None,
    };
    // The log says when it was written and under which settings (docs/audit.md, "Lifecycle
    // records"): queued before the listening lines, so before any request's record.
    audit
        .record_start(config.logged_settings())
        .await
        .context("cannot queue the proxy_start audit record")?;
    announce(&config.log, format!("robots-proxy listening on {local}"));
    if let Some(tls) = &tls_listener {
        let tls_local = tls.listener.local_addr()?;
        guard.add_own_listener(tls_local);
        announce(&config.log, format!("robots-proxy TLS listening on {tls_local}"));
    }
    announce(&config.log, format!("robots-proxy admin listening on {admin_local}"));
    tracing::info!(
        listen = %local, admin = %admin_local, audit = %audit_path.display(),
        "robots-proxy started"
    );

    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin_task = {
        let section = config.admin.clone();
        let reloader: Arc<dyn Reloads> = reloader.clone();
        let (proxy, reloader) = (proxy.clone(), Some(reloader));
        tokio::spawn(async move {
            let stopped = async move {
                let _ = admin_stopped.await;
            };
            robots_proxy::admin::serve_with_reload(
                admin_listener,
                proxy,
                &section,
                reloader,
                stopped,
            )
            .await;
        })
    };

    // `[[exceptions]]` expiring within seven days: a warning once a day each (checked
    // hourly, and after every reload).
    let expiring = proxy.clone();
    let expiry_task = tokio::spawn(async move {
        let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            hourly.tick().await;
            let _ = expiring.policy().exceptions().warn_expiring(expiring.clock().now());
        }
    });
    let grace = config.proxy.shutdown_grace;
    let delay = config.proxy.shutdown_delay;
    let draining = proxy.metrics().clone();
    let hup_task = tokio::spawn(async move {
        while hup.recv().await.is_some() {
            reloader.reload(Trigger::Signal).await;
        }
    });
    let reopening = proxy.clone();
    let usr1_task = tokio::spawn(async move {
        while usr1.recv().await.is_some() {
            match reopening.audit().reopen().await {
                Ok(()) => tracing::info!(
                    "SIGUSR1: audit log reopened (the configuration was not read again)"
                ),
                Err(e) => tracing::error!(error = %e, "SIGUSR1: cannot reopen the audit log"),
            }
        }
    });
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: stopping"),
            _ = int.recv() => tracing::info!("SIGINT: stopping"),
        }
        tell_systemd("STOPPING=1\nSTATUS=draining connections");
        // proxy.shutdown_delay: not ready from now on, but still accepting until the load
        // balancers (Kubernetes endpoints) have taken this instance out.
        draining.set_draining();
        if !delay.is_zero() {
            tracing::info!(
                delay = %humantime::format_duration(delay),
                "/readyz answers 503; still accepting connections for proxy.shutdown_delay"
            );
            tokio::time::sleep(delay).await;
        }
    };
    tell_systemd(&format!("READY=1\nSTATUS=proxy on {local}, admin on {admin_local}"));
    proxy.serve_with_tls(listener, tls_listener, shutdown, grace).await;
    hup_task.abort();
    usr1_task.abort();
    expiry_task.abort();
    let _ = admin_stop.send(());
    let _ = admin_task.await;
    let _ = directory_stop.send(());
    if let Some(task) = directory_task {
        let _ = task.await;
    }
    if let Err(error) = audit.record_stop().await {
        tracing::error!(%error, "cannot queue the proxy_stop audit record");
    }
    audit.close().await.context("cannot flush the audit log")?;
    tracing::info!("robots-proxy stopped");
    Ok(())
}

/// The port the default fleet instance name carries: `proxy.listen`'s, or the process id
/// when the port is chosen by the system (0), so two such instances on one host differ.
fn fleet_port(config: &Config) -> u16 {
    match config.proxy.listen.port() {
        0 => u16::try_from(std::process::id() % 65_536).unwrap_or(0),
        port => port,
    }
}

/// The TLS listener for clients (`proxy.tls_listen`), bound, with its certificate, key and
/// client certificate verification loaded.
fn tls_listener(
    config: &robots_proxy::config::Config,
    addr: std::net::SocketAddr,
    backlog: u32,
) -> anyhow::Result<robots_proxy::proxy::TlsListener> {
    use anyhow::Context as _;
    use robots_proxy::preflight::listener_files;
    use robots_proxy::tls::listener::listener_config;
    // Config::validate has checked that both are set with proxy.tls_listen.
    let Some(files) = listener_files(config) else {
        anyhow::bail!("proxy.tls_listen needs proxy.tls_certificate and proxy.tls_key");
    };
    let tls = Arc::new(arc_swap::ArcSwap::new(listener_config(files)?));
    let listener = listen(addr, backlog)
        .with_context(|| format!("cannot listen on {addr} (proxy.tls_listen)"))?;
    Ok(robots_proxy::proxy::TlsListener { listener, config: tls })
}

/// A listener on `addr` with a listen queue of `backlog` connections.
fn listen(addr: std::net::SocketAddr, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As std and tokio do: a restarted proxy can listen again at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// A line `serve` writes to standard error whatever `log.level` says (operators and scripts
/// read the listening addresses from it), in the log's format ([`robots_proxy::logging::line`]).
fn announce(log: &robots_proxy::config::LogSection, message: String) {
    robots_proxy::logging::line(log.format, tracing::Level::INFO, "robots_proxy::serve", &message);
}
