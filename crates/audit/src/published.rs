//! The latest checkpoint, as `GET /audit/checkpoint` serves it on `signing.directory_listen`
//! (issue 39, item 6): the writer publishes each checkpoint's signed note once its line is in
//! the file.

use std::sync::{Arc, RwLock};

/// The note (C2SP tlog-checkpoint, signed-note text) of the last checkpoint written, and the
/// witnesses' cosignature lines gathered for it (`audit.witnesses`).
#[derive(Debug, Clone, Default)]
pub struct LatestCheckpoint(Arc<RwLock<Option<Served>>>);

#[derive(Debug)]
struct Served {
    note: Arc<str>,
    cosignatures: Vec<String>,
}

impl LatestCheckpoint {
    /// The last checkpoint's note, if one was written since the start, with the witnesses'
    /// cosignature lines gathered for it after the log's signature.
    pub fn get(&self) -> Option<Arc<str>> {
        let served = self.0.read().ok()?;
        let served = served.as_ref()?;
        if served.cosignatures.is_empty() {
            return Some(served.note.clone());
        }
        Some(format!("{}{}", served.note, served.cosignatures.concat()).into())
    }

    /// Takes the note of the checkpoint `line` (its `audit.checkpoint.note`).
    pub(super) fn publish(&self, line: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Note {
            #[serde(rename = "audit.checkpoint.note")]
            note: Option<String>,
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let Ok(Note { note: Some(note) }) = serde_json::from_slice(line) else { return };
        if let Ok(mut latest) = self.0.write() {
            *latest = Some(Served { note: note.into(), cosignatures: Vec::new() });
        }
    }

    /// Adds a witness's cosignature `line` (newline included) of the checkpoint `note`, while
    /// that is still the latest.
    pub(super) fn add_cosignature(&self, note: &str, line: &str) {
        if let Ok(mut latest) = self.0.write() {
            if let Some(served) = latest.as_mut().filter(|s| &*s.note == note) {
                if !served.cosignatures.iter().any(|l| l == line) {
                    served.cosignatures.push(line.to_owned());
                }
            }
        }
    }
}

/// The `GET /audit/checkpoint` page of the key directory's listener; `None` without
/// `audit.checkpoint_key`.
pub struct CheckpointPage(pub Option<LatestCheckpoint>);

/// The path it is served at.
pub const CHECKPOINT_PATH: &str = "/audit/checkpoint";

impl robots_proxy_identity::directory::Pages for CheckpointPage {
    fn answer(
        &self,
        method: &http::Method,
        path: &str,
        _headers: &http::HeaderMap,
        _now: std::time::SystemTime,
    ) -> Option<http::Response<http_body_util::Full<bytes::Bytes>>> {
        if path != CHECKPOINT_PATH {
            return None;
        }
        let plain = |status: http::StatusCode, body: String| {
            let mut resp = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(body)));
            *resp.status_mut() = status;
            let value = http::HeaderValue::from_static("text/plain; charset=utf-8");
            resp.headers_mut().insert(http::header::CONTENT_TYPE, value);
            let value = http::HeaderValue::from_static("no-cache");
            resp.headers_mut().insert(http::header::CACHE_CONTROL, value);
            resp
        };
        if method != http::Method::GET && method != http::Method::HEAD {
            let mut resp = plain(
                http::StatusCode::METHOD_NOT_ALLOWED,
                "405 Method Not Allowed: GET /audit/checkpoint\n".into(),
            );
            resp.headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
            return Some(resp);
        }
        let answer = match &self.0 {
            None => plain(
                http::StatusCode::NOT_FOUND,
                "404 Not Found: no audit.checkpoint_key is configured, so this proxy signs no \
                 checkpoints of its audit log\n"
                    .into(),
            ),
            Some(latest) => match latest.get() {
                Some(note) => plain(http::StatusCode::OK, note.to_string()),
                None => plain(
                    http::StatusCode::NOT_FOUND,
                    "404 Not Found: no checkpoint written since the start yet\n".into(),
                ),
            },
        };
        Some(answer)
    }
}
