//! `signing.client_signatures = "cosign"`: the proxy's signature beside a client's.
//!
//! draft-ietf-webbotauth-httpsig-protocol ("Multiple Signatures"): "A signer that covers
//! `"signature";key=X` MUST also cover `"signature-input";key=X`, and MUST cover every component
//! identifier listed in `"signature-input";key=X`", and one "that cannot cover one of those
//! components, because it changed the value the inner signature was computed over, MUST NOT
//! cover the inner `signature` member. It signs the request on its own terms, and the inner
//! signature is left untouched."
//!
//! So the proxy reads the client's signature fields as they arrive ([`ClientSignature::read`]),
//! with the values of every component they cover; when the request leaves it checks that none of
//! those values changed, and signs under a label of its own that the client does not use,
//! covering its own components, its own `Signature-Agent` member, every component of every
//! client label, and each client label's `signature-input`, `signature` and `signature-agent`
//! members (RFC 9421 §2.1.2, the `key` parameter: a dictionary member, strictly serialised; the
//! draft's example uses `key` alone, and RFC 9421 §2.1 says `sf` is redundant with it).
//!
//! The client's field lines are never rewritten: the proxy's members go on field lines of their
//! own (`Signature-Agent`, `Signature-Input`, `Signature`), which a recipient may join to the
//! client's with a comma (RFC 9110 §5.3): the same dictionaries with one more member.
//!
//! The proxy covers a client's signature only when it can stand behind it: every label verifies
//! with a key of the identity's `client_keys` (the keys of the client agents the configuration
//! trusts for that identity, [`super::trust`]), within its `created`/`expires`. Otherwise the
//! organisation's key would sign whatever header values a client chose to list.
//!
//! Each client field is read and parsed once ([`Fields`]); at most [`MAX_CLIENT_LABELS`] labels
//! and [`MAX_CLIENT_COMPONENTS`] components are looked at, so neither the work nor the proxy's
//! own fields grow with what a client sends.
//!
//! When the client's signature cannot be covered (a component the proxy does not know or that
//! it changes, a signature that does not verify, too many labels), the proxy signs on its own
//! terms beside it, and the caller reports why ([`Skipped`]). A field that a recipient joining
//! the field lines (RFC 9110 §5.3) could not read with the proxy's member added (not a
//! dictionary) is replaced by the proxy's ([`Left::Replaced`]); a legacy string
//! `Signature-Agent` under a signature that verifies is forwarded as the client signed it
//! ([`Left::Kept`]), since a member added to it would break that signature.

use std::collections::{HashMap, HashSet};

use base64ct::{Base64, Encoding};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use sfv::FieldType as _;

use super::request::{self, Target};
use super::section::Component;
use super::trust::TrustedKeys;
use super::{Signing, SigningError, LABEL, SIGNATURE, SIGNATURE_AGENT, SIGNATURE_INPUT};

/// Most client labels looked at: past it, the proxy signs on its own terms
/// ([`SkipReason::TooManyLabels`]).
pub const MAX_CLIENT_LABELS: usize = 8;
/// Most distinct components of the client's labels looked at, all labels together.
pub const MAX_CLIENT_COMPONENTS: usize = 32;
/// How far in the future a client's `created` may be (clock skew).
const SKEW: u64 = 60;

/// Why the client's signature was not cosigned: the label of `robots_proxy_cosign_skipped_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// `Signature-Input` is not a dictionary of inner lists of strings.
    MalformedSignatureInput,
    /// `Signature` is not a dictionary, or a label of `Signature-Input` has no byte sequence in it.
    MalformedSignature,
    /// `Signature-Agent` is neither a dictionary nor a string.
    MalformedSignatureAgent,
    /// `Signature-Agent` is the legacy bare string, to which no member can be added.
    LegacySignatureAgent,
    /// The client's signature covers a component the proxy does not compute (`@request-target`,
    /// `@query-param`, a parameter other than `key`, …).
    UnsupportedComponent,
    /// It covers a component that is not in the request, or whose value the proxy changes
    /// (`Via`, a hop-by-hop field, `Host`, a whole signature field the proxy adds a member to…).
    ChangedComponent,
    /// More than [`MAX_CLIENT_LABELS`] labels or [`MAX_CLIENT_COMPONENTS`] components.
    TooManyLabels,
    /// A label does not verify with the identity's `client_keys` (or it has none), or is
    /// expired.
    UnverifiedSignature,
}

impl SkipReason {
    /// The reason, as the metric and the audit record name it.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::MalformedSignatureInput => "malformed_signature_input",
            SkipReason::MalformedSignature => "malformed_signature",
            SkipReason::MalformedSignatureAgent => "malformed_signature_agent",
            SkipReason::LegacySignatureAgent => "legacy_signature_agent",
            SkipReason::UnsupportedComponent => "unsupported_component",
            SkipReason::ChangedComponent => "changed_component",
            SkipReason::TooManyLabels => "too_many_labels",
            SkipReason::UnverifiedSignature => "unverified_signature",
        }
    }
}

/// What became of the client's fields when its signature was not covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// Forwarded untouched, the proxy's signature on field lines of its own beside them.
    Beside,
    /// Replaced by the proxy's: a field that is not a dictionary, which the proxy's member
    /// would make unreadable to a recipient joining the field lines.
    Replaced,
    /// Forwarded as the client signed it, without the proxy's signature: a legacy string
    /// `Signature-Agent` under a signature that verifies with the identity's `client_keys`.
    Kept,
}

/// Why a client's signature was left uncovered by the proxy's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The kind.
    pub reason: SkipReason,
    /// What exactly (the component, the label).
    pub detail: String,
    /// What became of the client's fields.
    pub left: Left,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.detail)?;
        match self.left {
            Left::Beside => Ok(()),
            Left::Replaced => f.write_str(" (the client's signature fields were replaced)"),
            Left::Kept => {
                f.write_str(" (forwarded as the client signed it, not signed by the proxy)")
            }
        }
    }
}

fn skip(reason: SkipReason, detail: impl Into<String>) -> Skipped {
    Skipped { reason, detail: detail.into(), left: Left::Beside }
}

fn replace(reason: SkipReason, detail: impl Into<String>) -> Skipped {
    Skipped { reason, detail: detail.into(), left: Left::Replaced }
}

/// What [`Signing::sign_beside`] did about the client's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cosign {
    /// The proxy's signature covers these client labels.
    Covered(Vec<String>),
    /// The proxy's signature does not cover the client's: why, and what became of it.
    Skipped(Skipped),
}

/// A derived component the proxy computes (RFC 9421 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Derived {
    Method,
    Authority,
    Scheme,
    TargetUri,
    Path,
    Query,
}

/// A covered component: a derived one or a field (with the member `key`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Derived(Derived),
    Field { name: HeaderName, key: Option<String> },
}

/// One component of the client's signature: its identifier as `Signature-Input` lists it
/// (serialised), and its value when the request arrived.
#[derive(Debug, Clone)]
struct Covered {
    identifier: String,
    what: What,
    arrived: String,
}

/// The client's signature fields as the request arrived (`signing.client_signatures =
/// "cosign"`).
#[derive(Debug, Clone)]
pub struct ClientSignature {
    /// The members' keys of the three fields: what the proxy's label must differ from.
    taken: HashSet<String>,
    /// The client's labels and the union of what they cover, or why they cannot be covered.
    cover: Result<(Vec<String>, Vec<Covered>), Skipped>,
}

#[cfg(test)]
thread_local! {
    /// Field reads (each a join of a field's lines, O(its size)) on this thread: the work a
    /// request's signature fields cost, for the tests.
    static READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One field, read: absent, a dictionary, or visible ASCII that is not one, or not ASCII.
#[derive(Debug)]
enum Field {
    Absent,
    Dict(sfv::Dictionary),
    Text(String),
    NotAscii,
}

impl Field {
    /// Every line of `name` in `headers`, joined (RFC 9421 §2.1) and parsed once.
    fn read(headers: &HeaderMap, name: &HeaderName) -> Field {
        match joined(headers, name) {
            None => Field::Absent,
            Some(Err(_)) => Field::NotAscii,
            Some(Ok(text)) => match sfv::Parser::new(&text).parse::<sfv::Dictionary>() {
                Ok(dict) => Field::Dict(dict),
                Err(_) => Field::Text(text),
            },
        }
    }
}

/// The header fields of a request, each read and parsed at most once however many components
/// name it.
struct Fields<'h> {
    headers: &'h HeaderMap,
    read: HashMap<HeaderName, Field>,
}

impl<'h> Fields<'h> {
    fn new(headers: &'h HeaderMap) -> Fields<'h> {
        Fields { headers, read: HashMap::new() }
    }

    fn field(&mut self, name: &HeaderName) -> &Field {
        let headers = self.headers;
        self.read.entry(name.clone()).or_insert_with(|| Field::read(headers, name))
    }

    /// The value of `what` in the request `target` (RFC 9421 §2.1, §2.2); `Err` says why
    /// there is none.
    fn value(&mut self, what: &What, target: &Target<'_>) -> Result<String, &'static str> {
        let (name, key) = match what {
            What::Derived(d) => return Ok(derived_value(*d, target)),
            What::Field { name, key } => (name, key),
        };
        let Some(key) = key else {
            // The whole field: its lines joined, visible ASCII.
            let text = joined(self.headers, name).ok_or("is not in the request")?;
            return text.map_err(|_| "is not visible ASCII");
        };
        match self.field(name) {
            Field::Absent => Err("is not in the request"),
            Field::NotAscii => Err("is not visible ASCII"),
            Field::Text(_) => Err("is not a dictionary"),
            Field::Dict(dict) => {
                let member = dict.get(key.as_str()).ok_or("has no such member")?;
                let one: sfv::List = vec![member.clone()];
                one.serialize().ok_or("has an empty member")
            }
        }
    }
}

impl ClientSignature {
    /// The client's signature of the request `arrival` with `headers`, as it arrived, checked
    /// against `trusted` at `now`; `None` when it carries neither `Signature` nor
    /// `Signature-Input`.
    pub fn read(
        arrival: &Target<'_>,
        headers: &HeaderMap,
        trusted: &TrustedKeys,
        now: std::time::SystemTime,
    ) -> Option<ClientSignature> {
        if !headers.contains_key(&SIGNATURE) && !headers.contains_key(&SIGNATURE_INPUT) {
            return None;
        }
        let mut fields = Fields::new(headers);
        let mut taken = HashSet::new();
        for name in [&SIGNATURE_INPUT, &SIGNATURE, &SIGNATURE_AGENT] {
            if let Field::Dict(d) = fields.field(name) {
                taken.extend(d.keys().map(|k| k.as_str().to_owned()));
            }
        }
        let now = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let cover = cover(arrival, &mut fields, trusted, now);
        Some(ClientSignature { taken, cover })
    }

    /// A label the client does not use: `sig1`, else `sig2`, … (at most one more try than
    /// the client has members).
    fn free_label(&self) -> String {
        if !self.taken.contains(LABEL) {
            return LABEL.to_owned();
        }
        (2..)
            .map(|n| format!("sig{n}"))
            .find(|l| !self.taken.contains(l))
            .unwrap_or_else(|| "robots-proxy".to_owned())
    }
}

/// Every line of `name`, joined with `, ` (RFC 9421 §2.1); `None` when absent, `Err` with the
/// bytes as text (lossy) when a line is not visible ASCII.
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<Result<String, String>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    #[cfg(test)]
    READS.with(|r| r.set(r.get() + 1));
    let mut text = String::new();
    let mut ok = true;
    for (i, line) in lines.enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        match line.to_str() {
            Ok(s) => text.push_str(s.trim()),
            Err(_) => {
                ok = false;
                text.push_str(&String::from_utf8_lossy(line.as_bytes()));
            }
        }
    }
    Some(if ok { Ok(text) } else { Err(text) })
}

/// The client's labels and what they cover, with the values on arrival, when every label
/// verifies with `trusted`; otherwise why not, and what to do with the client's fields.
fn cover(
    arrival: &Target<'_>,
    fields: &mut Fields<'_>,
    trusted: &TrustedKeys,
    now: u64,
) -> Result<(Vec<String>, Vec<Covered>), Skipped> {
    use SkipReason::*;
    // A field that is not a dictionary: the proxy's member, on a line of its own, would make
    // the joined field unreadable, and the client's signature verifies nowhere.
    if let Field::Text(_) | Field::NotAscii = fields.field(&SIGNATURE_INPUT) {
        return Err(replace(MalformedSignatureInput, "not a structured-field dictionary"));
    }
    if let Field::Text(_) | Field::NotAscii = fields.field(&SIGNATURE) {
        return Err(replace(MalformedSignature, "not a structured-field dictionary"));
    }
    let legacy = match fields.field(&SIGNATURE_AGENT) {
        Field::NotAscii => return Err(replace(MalformedSignatureAgent, "not visible ASCII")),
        Field::Text(text) => {
            let item = sfv::Parser::new(text).parse::<sfv::Item>();
            if !item.is_ok_and(|i| i.bare_item.as_string().is_some()) {
                return Err(replace(MalformedSignatureAgent, "neither a dictionary nor a string"));
            }
            true
        }
        _ => false,
    };
    let labels = verified(arrival, fields, trusted, now, legacy);
    if !legacy {
        return labels;
    }
    // A legacy string: no member can be added to it without breaking the client's signature.
    const WHY: &str = "a string, not a dictionary, so the proxy's member cannot be added";
    Err(match labels {
        Ok(_) => Skipped {
            reason: LegacySignatureAgent,
            detail: format!("{WHY} without breaking the client's signature, which verifies"),
            left: Left::Kept,
        },
        Err(why) => replace(LegacySignatureAgent, format!("{WHY}; and {why}")),
    })
}

/// The client's labels, each checked and verified with `trusted`, and the union of what they
/// cover; `legacy`: `Signature-Agent` is a string (then its whole field may be covered).
fn verified(
    arrival: &Target<'_>,
    fields: &mut Fields<'_>,
    trusted: &TrustedKeys,
    now: u64,
    legacy: bool,
) -> Result<(Vec<String>, Vec<Covered>), Skipped> {
    use SkipReason::*;
    let input = match fields.field(&SIGNATURE_INPUT) {
        Field::Dict(d) if !d.is_empty() => d.clone(),
        _ => return Err(skip(MalformedSignatureInput, "no signature in it")),
    };
    if input.len() > MAX_CLIENT_LABELS {
        return Err(skip(
            TooManyLabels,
            format!("{} labels, at most {MAX_CLIENT_LABELS} are looked at", input.len()),
        ));
    }
    let signature = match fields.field(&SIGNATURE) {
        Field::Dict(d) => d.clone(),
        _ => return Err(skip(MalformedSignature, "absent")),
    };
    let mut labels = Vec::with_capacity(input.len());
    let mut covered: Vec<Covered> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut unverified: Option<String> = None;
    for (label, entry) in &input {
        let sfv::ListEntry::InnerList(list) = entry else {
            return Err(skip(MalformedSignatureInput, format!("{label} is not an inner list")));
        };
        let bytes = match signature.get(label.as_str()) {
            Some(sfv::ListEntry::Item(sfv::Item {
                bare_item: sfv::BareItem::ByteSequence(b),
                ..
            })) => b.clone(),
            _ => return Err(skip(MalformedSignature, format!("no signature for {label}"))),
        };
        let mut base = String::with_capacity(256);
        for item in &list.items {
            let identifier = item.serialize();
            let at = match index.get(&identifier) {
                Some(&at) => at,
                None => {
                    if covered.len() == MAX_CLIENT_COMPONENTS {
                        return Err(skip(
                            TooManyLabels,
                            format!("more than {MAX_CLIENT_COMPONENTS} components"),
                        ));
                    }
                    let what = component(item).map_err(|e| skip(UnsupportedComponent, e))?;
                    if let What::Field { name, key: None } = &what {
                        let whole_agent = legacy && *name == SIGNATURE_AGENT;
                        if [&SIGNATURE, &SIGNATURE_INPUT, &SIGNATURE_AGENT].contains(&name)
                            && !whole_agent
                        {
                            return Err(skip(
                                ChangedComponent,
                                format!("{identifier} (the whole field, which the proxy adds to)"),
                            ));
                        }
                    }
                    let arrived = fields
                        .value(&what, arrival)
                        .map_err(|why| skip(ChangedComponent, format!("{identifier} {why}")))?;
                    index.insert(identifier.clone(), covered.len());
                    covered.push(Covered { identifier, what, arrived });
                    covered.len() - 1
                }
            };
            base.push_str(&covered[at].identifier);
            base.push_str(": ");
            base.push_str(&covered[at].arrived);
            base.push('\n');
        }
        if unverified.is_none() {
            if let Err(why) = verify(entry, list, &mut base, &bytes, trusted, now) {
                unverified = Some(format!("{label} {why}"));
            }
        }
        labels.push(label.as_str().to_owned());
    }
    match unverified {
        Some(why) => Err(skip(UnverifiedSignature, why)),
        None => Ok((labels, covered)),
    }
}

/// Whether the label `entry` (its inner list `list`), whose component lines are `base`,
/// is signed with `signature` by a key of `trusted`, within its `created`/`expires` at `now`.
fn verify(
    entry: &sfv::ListEntry,
    list: &sfv::InnerList,
    base: &mut String,
    signature: &[u8],
    trusted: &TrustedKeys,
    now: u64,
) -> Result<(), &'static str> {
    if trusted.is_empty() {
        return Err("cannot be verified: the identity has no client_keys");
    }
    let param = |name: &str| list.params.get(name);
    let int = |name: &str| param(name).and_then(|v| v.as_integer()).map(i64::from);
    if int("expires").is_some_and(|e| e <= now as i64) {
        return Err("has expired");
    }
    if int("created").is_some_and(|c| c > (now + SKEW) as i64) {
        return Err("was created in the future");
    }
    if param("alg").is_some_and(|a| a.as_string().map(|s| s.as_str()) != Some(super::ALG)) {
        return Err("has an alg other than ed25519");
    }
    let keyid = param("keyid").and_then(|k| k.as_string()).ok_or("has no keyid")?;
    let params = vec![entry.clone()].serialize().ok_or("has no parameters")?;
    base.push_str("\"@signature-params\": ");
    base.push_str(&params);
    trusted.verify(keyid.as_str(), base.as_bytes(), signature)
}

/// What a `Signature-Input` item names, if the proxy can compute it.
fn component(item: &sfv::Item) -> Result<What, String> {
    let identifier = item.serialize();
    let Some(name) = item.bare_item.as_string().map(|s| s.as_str()) else {
        return Err(format!("{identifier} is not a string"));
    };
    let mut key = None;
    for (param, v) in &item.params {
        match (param.as_str(), v.as_string()) {
            ("key", Some(k)) if !name.starts_with('@') && key.is_none() => {
                key = Some(k.as_str().to_owned());
            }
            _ => return Err(format!("{identifier}: the parameter {} is not supported", param)),
        }
    }
    let derived = match name {
        "@method" => Derived::Method,
        "@authority" => Derived::Authority,
        "@scheme" => Derived::Scheme,
        "@target-uri" => Derived::TargetUri,
        "@path" => Derived::Path,
        "@query" => Derived::Query,
        _ if name.starts_with('@') => return Err(format!("{identifier} is not supported")),
        _ => {
            let name = HeaderName::from_bytes(name.as_bytes())
                .ok()
                .filter(|n| n.as_str() == name)
                .ok_or_else(|| format!("{identifier} is not a lower-case field name"))?;
            return Ok(What::Field { name, key });
        }
    };
    Ok(What::Derived(derived))
}

/// The value of a derived component in the request `target` (RFC 9421 §2.2).
fn derived_value(what: Derived, target: &Target<'_>) -> String {
    match what {
        Derived::Method => target.method.to_owned(),
        Derived::Authority => target.authority.to_owned(),
        Derived::Scheme => target.scheme.to_owned(),
        Derived::Path => target.path().to_owned(),
        Derived::Query => format!("?{}", target.query().unwrap_or("")),
        Derived::TargetUri => {
            let mut uri = format!("{}://{}{}", target.scheme, target.authority, target.path());
            if let Some(q) = target.query() {
                uri.push('?');
                uri.push_str(q);
            }
            uri
        }
    }
}

fn derived(c: Component) -> Derived {
    match c {
        Component::Method => Derived::Method,
        Component::Authority => Derived::Authority,
        Component::Path => Derived::Path,
        Component::Query => Derived::Query,
        Component::TargetUri => Derived::TargetUri,
    }
}

/// `"<field>";key="<label>"`, as `Signature-Input` lists it.
fn member(field: &str, label: &str) -> String {
    format!("\"{field}\";key=\"{label}\"")
}

impl<'a> Signing<'a> {
    /// Signs the request `target` with `headers` (after every other change, like
    /// [`Signing::sign`]) beside the client's signature `client` read when it arrived: under a
    /// label the client does not use, the proxy's members on field lines of their own, the
    /// client's lines untouched. The proxy's signature covers the client's when it can
    /// ([`Cosign::Covered`]); otherwise it covers the proxy's own components only, or replaces
    /// or keeps the client's fields ([`Left`]), and says why ([`Cosign::Skipped`]). Always a
    /// fresh signature beside (`signing.reuse` does not apply). The key id is `None`, and
    /// `headers` unchanged, when none of the identity's keys signs at `now` (then nothing is
    /// reported) or the client's fields are kept.
    pub fn sign_beside(
        &self,
        target: &Target<'_>,
        headers: &mut HeaderMap,
        now: std::time::SystemTime,
        client: &ClientSignature,
    ) -> Result<(Option<&'a str>, Option<Cosign>), SigningError> {
        match &client.cover {
            Err(kept @ Skipped { left: Left::Kept, .. }) => {
                return Ok((None, Some(Cosign::Skipped(kept.clone()))));
            }
            Err(replaced @ Skipped { left: Left::Replaced, .. }) => {
                let keyid = self.sign(target, headers, now)?;
                return Ok((keyid, keyid.map(|_| Cosign::Skipped(replaced.clone()))));
            }
            _ => {}
        }
        let Some(slot) = self.slot_at(now) else { return Ok((None, None)) };
        let mut fields = Fields::new(headers);
        let outcome = match &client.cover {
            Err(skipped) => Cosign::Skipped(skipped.clone()),
            Ok((labels, covered)) => match unchanged(covered, target, &mut fields) {
                Ok(()) => Cosign::Covered(labels.clone()),
                Err(skipped) => Cosign::Skipped(skipped),
            },
        };
        let label = client.free_label();
        let signer = self.signer;
        // The identifiers and the signature base's lines, the proxy's own first; each at most
        // once (the client's are already distinct, and at most MAX_CLIENT_COMPONENTS).
        let mut ids: Vec<String> = Vec::with_capacity(8);
        let mut seen: HashSet<String> = HashSet::new();
        let mut base = String::with_capacity(512);
        let mut line = |id: String, value: &str, ids: &mut Vec<String>| {
            if seen.insert(id.clone()) {
                base.push_str(&id);
                base.push_str(": ");
                base.push_str(value);
                base.push('\n');
                ids.push(id);
            }
        };
        for c in signer.coverage.components() {
            let v = derived_value(derived(*c), target);
            line(format!("\"{}\"", c.name()), &v, &mut ids);
        }
        line(member("signature-agent", &label), &self.identity.agent_value, &mut ids);
        if let (Cosign::Covered(labels), Ok((_, covered))) = (&outcome, &client.cover) {
            for c in covered {
                line(c.identifier.clone(), &c.arrived, &mut ids);
            }
            for l in labels {
                for field in [&SIGNATURE_INPUT, &SIGNATURE, &SIGNATURE_AGENT] {
                    let what = What::Field { name: field.clone(), key: Some(l.clone()) };
                    match fields.value(&what, target) {
                        Ok(v) => line(member(field.as_str(), l), &v, &mut ids),
                        // A label without a Signature-Agent member: not a Web Bot Auth one.
                        Err(_) if *field == SIGNATURE_AGENT => {}
                        Err(e) => return Err(SigningError::Fields(format!("{field}: {e}"))),
                    }
                }
            }
        }
        drop(fields);
        let key = self.key(slot);
        let created =
            now.duration_since(std::time::UNIX_EPOCH).map_err(|_| SigningError::Clock)?.as_secs();
        let nonce = request::nonce()?;
        let inner = format!("({})", ids.join(" "));
        let params = request::params_of(
            &inner,
            created,
            created + signer.lifetime,
            key.keyid(),
            Some(&nonce),
        );
        base.push_str("\"@signature-params\": ");
        base.push_str(&params);
        let signature = key.sign(base.as_bytes());
        let field = |text: String| {
            HeaderValue::from_str(&text).map_err(|e| SigningError::Fields(e.to_string()))
        };
        let agent = field(format!("{label}={}", self.identity.agent_value))?;
        let input = field(format!("{label}={params}"))?;
        let signature = field(format!("{label}=:{}:", Base64::encode_string(&signature)))?;
        headers.append(SIGNATURE_AGENT.clone(), agent);
        headers.append(SIGNATURE_INPUT.clone(), input);
        headers.append(SIGNATURE.clone(), signature);
        Ok((Some(key.keyid()), Some(outcome)))
    }
}

/// Whether every component the client covers has, in the request about to leave (`fields`),
/// the value it had when the request arrived.
fn unchanged(
    covered: &[Covered],
    target: &Target<'_>,
    fields: &mut Fields<'_>,
) -> Result<(), Skipped> {
    for c in covered {
        match fields.value(&c.what, target) {
            Ok(v) if v == c.arrived => {}
            Ok(_) => {
                return Err(skip(
                    SkipReason::ChangedComponent,
                    format!("{} (the proxy changes it)", c.identifier),
                ))
            }
            Err(why) => {
                return Err(skip(
                    SkipReason::ChangedComponent,
                    format!("{} {why} as forwarded", c.identifier),
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cosign_tests.rs"]
mod tests;
