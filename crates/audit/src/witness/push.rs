//! One witness's task: `POST <prefix>/add-checkpoint` for each checkpoint (C2SP tlog-witness),
//! and what its answer means.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{mpsc, watch};

use super::history::seed_from_file;
use super::{Hub, PushCounts, Witness, Written, PUSH_TIMEOUT};
use crate::merkle;

pub(super) type Client =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The largest answer read from a witness (a few signature lines, or a size).
const MAX_ANSWER: usize = 64 * 1024;

/// A client for the witnesses: HTTP/1.1 with keep-alive, TLS with `tls`.
pub(super) fn client(tls: rustls::ClientConfig) -> Client {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(PUSH_TIMEOUT));
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https)
}

/// Why a push gave no cosignature.
#[derive(Debug, thiserror::Error)]
pub(super) enum PushError {
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("{0}")]
    Http(String),
    #[error("answered {0}: {1}")]
    Status(u16, String),
    #[error("answered 409 twice (its size {0}); tried again at the next checkpoint")]
    Conflict(u64),
    #[error(
        "it has cosigned tree size {0} of {1}, larger than this checkpoint's {2}: the log was \
         cut or rolled back"
    )]
    Ahead(u64, String, u64),
    #[error("cannot prove consistency from its size {0}: {1}")]
    Proof(u64, String),
    #[error("no cosignature of key {0} in its answer")]
    NoCosignature(String),
    #[error("{0}")]
    BadCosignature(#[from] super::CosignatureError),
}

pub(super) struct Task {
    pub(super) witness: Witness,
    pub(super) counts: Arc<PushCounts>,
    pub(super) hub: Arc<Hub>,
    pub(super) client: Client,
    pub(super) log: mpsc::WeakSender<crate::Command>,
    pub(super) served: crate::LatestCheckpoint,
    pub(super) node: Arc<std::sync::OnceLock<String>>,
    /// The origin and tree size the witness last cosigned (or said it had, with a 409).
    pub(super) acked: Option<(String, u64)>,
    /// Failing since the last cosignature: later failures are logged at `debug`.
    pub(super) failing: bool,
}

impl Task {
    pub(super) async fn run(mut self, mut latest: watch::Receiver<Option<Arc<Written>>>) {
        loop {
            let checkpoint = latest.borrow_and_update().clone();
            // A tree of no leaves (a new tree's first checkpoint) has nothing to witness.
            if let Some(checkpoint) = checkpoint.filter(|c| c.size > 0) {
                self.push(&checkpoint).await;
            }
            if latest.changed().await.is_err() {
                return;
            }
        }
    }

    async fn push(&mut self, checkpoint: &Written) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = self.witness.key.name().to_owned();
        match self.exchange(checkpoint).await {
            Ok((line, time)) => {
                self.counts.ok.fetch_add(1, Relaxed);
                if self.failing {
                    tracing::info!(witness = %name, "the witness cosigns checkpoints again");
                    self.failing = false;
                }
                self.served.add_cosignature(&checkpoint.note, &line);
                let node = self.node.get().map(String::as_str);
                let record = super::record::line(&self.witness, checkpoint, &line, time, node);
                if let Some(log) = self.log.upgrade() {
                    let pending = crate::writer::Pending::from(record);
                    let _ = log.send(crate::Command::Record(pending, None)).await;
                }
            }
            Err(error) => {
                self.counts.failed.fetch_add(1, Relaxed);
                let url = &self.witness.url;
                if self.failing {
                    tracing::debug!(witness = %name, %url, %error, "witness push failed again");
                } else {
                    tracing::warn!(
                        witness = %name, %url, %error, size = checkpoint.size,
                        "the witness did not cosign the audit checkpoint; tried again at the next one",
                    );
                    self.failing = true;
                }
            }
        }
    }

    /// Sends the checkpoint, once more after a 409 with the size the witness has.
    async fn exchange(&mut self, checkpoint: &Written) -> Result<(String, u64), PushError> {
        let origin = &checkpoint.origin;
        let mut old = match &self.acked {
            Some((o, size)) if o == origin => *size,
            _ => 0,
        };
        for _ in 0..2 {
            if old > checkpoint.size {
                return Err(PushError::Ahead(old, origin.clone(), checkpoint.size));
            }
            let proof = self.proof(checkpoint, old).await?;
            let mut body = format!("old {old}\n");
            for hash in &proof {
                body.push_str(&merkle::encode(hash));
                body.push('\n');
            }
            body.push('\n');
            body.push_str(&checkpoint.note);
            let (status, answer) = self.post(body).await?;
            match status {
                200 => {
                    // The witness has stored it, whatever its signature says.
                    self.acked = Some((origin.clone(), checkpoint.size));
                    let key = &self.witness.key;
                    return match key.find(&checkpoint.text, answer.lines())? {
                        Some((line, time)) => Ok((format!("{line}\n"), time)),
                        None => Err(PushError::NoCosignature(key.to_string())),
                    };
                }
                409 => {
                    let size = answer.trim_end_matches('\n').parse::<u64>().map_err(|_| {
                        PushError::Status(409, "the body is not a tree size".to_owned())
                    })?;
                    self.acked = Some((origin.clone(), size));
                    old = size;
                }
                status => {
                    let said: String = answer.chars().take(200).collect();
                    let hint = match status {
                        404 => {
                            " (the witness does not know this log's origin: its operator \
                                adds it with the log's public key)"
                        }
                        403 => " (the witness does not trust this log's key)",
                        422 => " (the consistency proof did not verify for it)",
                        _ => "",
                    };
                    return Err(PushError::Status(status, format!("{}{hint}", said.trim())));
                }
            }
        }
        Err(PushError::Conflict(old))
    }

    /// The consistency proof from `old` to the checkpoint, from the history (caught up from
    /// the audit file when the witness is further behind), checked before it is sent.
    async fn proof(&self, checkpoint: &Written, old: u64) -> Result<Vec<merkle::Hash>, PushError> {
        if old == 0 {
            return Ok(Vec::new());
        }
        let hub = self.hub.clone();
        let origin = checkpoint.origin.clone();
        let (new, new_root) = (checkpoint.size, checkpoint.root);
        let fail = move |why: String| PushError::Proof(old, why);
        tokio::task::spawn_blocking(move || {
            let span = hub.history.lock().unwrap_or_else(|e| e.into_inner()).span(&origin, old);
            let span = match span {
                Some(span) => span,
                None => {
                    let (base_origin, base) = {
                        let history = hub.history.lock().unwrap_or_else(|e| e.into_inner());
                        let (o, b) = history.base();
                        (o.to_owned(), b.clone())
                    };
                    if base_origin != origin || old > base.size() {
                        return Err(format!("the log holds no tree {origin} of size {old}"));
                    }
                    let older = seed_from_file(&hub.path, &origin, old, &base)?;
                    let mut history = hub.history.lock().unwrap_or_else(|e| e.into_inner());
                    history.prepend(&origin, older);
                    history.span(&origin, old).ok_or("the history moved on")?
                }
            };
            let (proof, old_root) =
                span.consistency(old, new).ok_or("the sizes are outside the tree")?;
            if !merkle::verify_consistency(old, new, &old_root, &new_root, &proof) {
                return Err("the lines kept do not hash to the checkpoint's root".to_owned());
            }
            Ok(proof)
        })
        .await
        .map_err(|e| fail(e.to_string()))?
        .map_err(fail)
    }

    async fn post(&self, body: String) -> Result<(u16, String), PushError> {
        let url = format!("{}/add-checkpoint", self.witness.url);
        let request = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .header(http::header::USER_AGENT, concat!("robots-proxy/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| PushError::Http(format!("{url}: {e}")))?;
        let exchange = async {
            let response =
                self.client.request(request).await.map_err(|e| PushError::Http(causes(&e)))?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| PushError::Http(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        };
        tokio::time::timeout(PUSH_TIMEOUT, exchange)
            .await
            .map_err(|_| PushError::Timeout(PUSH_TIMEOUT))?
    }
}

/// An error and its causes, as one line (hyper's client error alone says only "client error").
fn causes(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        said.push_str(": ");
        said.push_str(&cause.to_string());
        source = cause.source();
    }
    said
}
