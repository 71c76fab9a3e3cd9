//! A transparency-log witness on 127.0.0.1 that implements C2SP tlog-witness's `add-checkpoint`
//! and cosigns with C2SP tlog-cosignature `cosignature/v1` (timestamped Ed25519), written here
//! from the two specifications, independently of the proxy's code:
//!
//! * it verifies the checkpoint's signature with the log's public key (key name = origin, key
//!   ID = SHA-256(origin || 0x0A || 0x01 || key)[:4]): 403 without one that verifies;
//! * it keeps, per origin, the size and root it last cosigned; an `old` size other than that
//!   is answered 409 with the size (`text/x.tlog.size`); `old` larger than the checkpoint
//!   400; a proof that does not verify (RFC 9162 §2.1.4.2) 422;
//! * then it stores the checkpoint and answers its cosignature line.
//!
//! One simplification: a real witness is configured with each log's origin; the proxy draws
//! a new origin for each tree, so this one takes any origin under `robots-proxy/audit/` that
//! the log's key signs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64ct::{Base64, Encoding};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

type Hash = [u8; 32];

/// What the witness saw: each request's old size, proof length and answer status.
#[derive(Debug, Clone)]
pub struct Seen {
    pub old: u64,
    pub size: u64,
    pub proof: usize,
    pub status: u16,
}

struct State {
    log_key: [u8; 32],
    pair: Ed25519KeyPair,
    name: String,
    /// origin -> (size, root) last cosigned.
    trees: Mutex<HashMap<String, (u64, Hash)>>,
    seen: Mutex<Vec<Seen>>,
}

pub struct Witness {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A new Ed25519 key pair.
pub fn key_pair() -> Ed25519KeyPair {
    let rng = ring::rand::SystemRandom::new();
    Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref()).unwrap()
}

/// The vkey (C2SP signed-note) of `pair` as an Ed25519 cosigner named `name`.
pub fn vkey(name: &str, pair: &Ed25519KeyPair) -> String {
    let mut key = vec![0x04u8];
    key.extend_from_slice(pair.public_key().as_ref());
    let id: String = cosigner_id(name, pair).iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}+{id}+{}", Base64::encode_string(&key))
}

fn cosigner_id(name: &str, pair: &Ed25519KeyPair) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', 0x04]);
    h.update(pair.public_key().as_ref());
    h.finalize()[..4].try_into().unwrap()
}

/// Whether `line` is a valid `cosignature/v1` of `text` by `public` under `name`.
pub fn cosignature_verifies(name: &str, public: &[u8], text: &str, line: &str) -> bool {
    let Some(rest) = line.strip_prefix(&format!("\u{2014} {name} ")) else { return false };
    let Ok(bytes) = Base64::decode_vec(rest.trim_end()) else { return false };
    if bytes.len() != 76 {
        return false;
    }
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', 0x04]);
    h.update(public);
    if bytes[..4] != h.finalize()[..4] {
        return false;
    }
    let time = u64::from_be_bytes(bytes[4..12].try_into().unwrap());
    let message = format!("cosignature/v1\ntime {time}\n{text}");
    time > 0
        && UnparsedPublicKey::new(&ED25519, public).verify(message.as_bytes(), &bytes[12..]).is_ok()
}

impl Witness {
    /// A witness named `name` with key `pair`, trusting the log key `log_key` (32 bytes), on
    /// `addr` (port 0: any).
    pub async fn start(
        addr: SocketAddr,
        name: &str,
        pair: Ed25519KeyPair,
        log_key: [u8; 32],
    ) -> Witness {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            log_key,
            pair,
            name: name.to_owned(),
            trees: Mutex::default(),
            seen: Mutex::default(),
        });
        let s = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let s = s.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let s = s.clone();
                        async move { Ok::<_, std::convert::Infallible>(answer(&s, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Witness { addr, state, task }
    }

    /// `http://ADDR` (the submission prefix).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// The size last cosigned for `origin`.
    pub fn size(&self, origin: &str) -> Option<u64> {
        self.state.trees.lock().unwrap().get(origin).map(|t| t.0)
    }
}

async fn answer(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: u16, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
        r
    };
    if req.method() != http::Method::POST || req.uri().path() != "/add-checkpoint" {
        return reply(404, "not found\n".into());
    }
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let Ok(body) = String::from_utf8(body.to_vec()) else {
        return reply(400, "not UTF-8\n".into());
    };
    let (status, text) = add_checkpoint(state, &body);
    let mut r = reply(status, text);
    if status == 409 {
        r.headers_mut().insert("content-type", "text/x.tlog.size".parse().unwrap());
    }
    r
}

fn add_checkpoint(state: &State, body: &str) -> (u16, String) {
    let Some((head, note)) = body.split_once("\n\n") else {
        return (400, "no empty line\n".into());
    };
    let mut lines = head.split('\n');
    let Some(old) =
        lines.next().and_then(|l| l.strip_prefix("old ")).and_then(|n| n.parse::<u64>().ok())
    else {
        return (400, "no old size line\n".into());
    };
    let proof: Option<Vec<Hash>> =
        lines.map(|l| Base64::decode_vec(l).ok().and_then(|b| b.try_into().ok())).collect();
    let Some(proof) = proof else { return (400, "a proof line is not a hash\n".into()) };
    // The checkpoint: text, blank line, signatures.
    let Some(at) = note.find("\n\n") else { return (400, "no signatures\n".into()) };
    let (text, signatures) = (&note[..at + 1], &note[at + 2..]);
    let parts: Vec<&str> = text.trim_end_matches('\n').split('\n').collect();
    let [origin, size, root] = parts[..3] else { return (400, "not a checkpoint\n".into()) };
    if !origin.starts_with("robots-proxy/audit/") {
        return (404, "unknown origin\n".into());
    }
    let (Ok(size), Some(root)) =
        (size.parse::<u64>(), Base64::decode_vec(root).ok().and_then(|b| Hash::try_from(b).ok()))
    else {
        return (400, "not a checkpoint\n".into());
    };
    // The log's signature: key name = origin, key ID of type 0x01.
    let mut h = Sha256::new();
    h.update(origin.as_bytes());
    h.update([b'\n', 0x01]);
    h.update(state.log_key);
    let id = h.finalize();
    let signed = signatures.lines().any(|l| {
        let Some(b64) = l.strip_prefix(&format!("\u{2014} {origin} ")) else { return false };
        let Ok(bytes) = Base64::decode_vec(b64) else { return false };
        bytes.len() == 68
            && bytes[..4] == id[..4]
            && UnparsedPublicKey::new(&ED25519, &state.log_key)
                .verify(text.as_bytes(), &bytes[4..])
                .is_ok()
    });
    let mut seen = Seen { old, size, proof: proof.len(), status: 0 };
    let (status, answer) = if !signed {
        (403, "no signature of a trusted key\n".to_owned())
    } else if old > size {
        (400, "old size larger than the checkpoint\n".to_owned())
    } else {
        // Check and store under one lock (the spec's race).
        let mut trees = state.trees.lock().unwrap();
        // Never cosigned: size 0, the empty tree's root (SHA-256 of nothing).
        let empty: Hash = Sha256::digest([]).into();
        let (known, known_root) = trees.get(origin).copied().unwrap_or((0, empty));
        if old != known {
            (409, format!("{known}\n"))
        } else if size == 0 && root != empty {
            (422, "a tree of size 0 has the empty tree's root\n".to_owned())
        } else if (old == 0 && !proof.is_empty())
            || (old == size && known_root != root)
            || (old > 0 && old < size && !consistent(old, size, &known_root, &root, &proof))
        {
            (422, "the consistency proof does not verify\n".to_owned())
        } else {
            trees.insert(origin.to_owned(), (size, root));
            let time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let message = format!("cosignature/v1\ntime {time}\n{text}");
            let mut sig = cosigner_id(&state.name, &state.pair).to_vec();
            sig.extend_from_slice(&time.to_be_bytes());
            sig.extend_from_slice(state.pair.sign(message.as_bytes()).as_ref());
            (200, format!("\u{2014} {} {}\n", state.name, Base64::encode_string(&sig)))
        }
    };
    seen.status = status;
    state.seen.lock().unwrap().push(seen);
    (status, answer)
}

fn node(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// RFC 9162 §2.1.4.2, for 0 < old < new.
fn consistent(old: u64, new: u64, old_root: &Hash, new_root: &Hash, proof: &[Hash]) -> bool {
    let mut path = proof.to_vec();
    if old.is_power_of_two() {
        path.insert(0, *old_root);
    }
    let Some((first, rest)) = path.split_first() else { return false };
    let (mut fnode, mut snode) = (old - 1, new - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node(c, &fr);
            sr = node(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    fr == *old_root && sr == *new_root && snode == 0
}
