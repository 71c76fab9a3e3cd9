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
//! When the client's signature cannot be covered (a field that is not a dictionary, a component
//! the proxy does not know or that it changes), the proxy signs on its own terms only, and the
//! caller reports why ([`Skipped`]).

use base64ct::{Base64, Encoding};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use sfv::FieldType as _;

use super::request::{self, Target};
use super::section::Component;
use super::{Signing, SigningError, LABEL, SIGNATURE, SIGNATURE_AGENT, SIGNATURE_INPUT};

/// Why the client's signature was not cosigned: the label of `robots_proxy_cosign_skipped_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// `Signature-Input` is not a dictionary of inner lists of strings.
    MalformedSignatureInput,
    /// `Signature` is not a dictionary, or a label of `Signature-Input` has no byte sequence in it.
    MalformedSignature,
    /// `Signature-Agent` is not a dictionary (the legacy bare string, for one).
    MalformedSignatureAgent,
    /// The client's signature covers a component the proxy does not compute (`@request-target`,
    /// `@query-param`, a parameter other than `key`, …).
    UnsupportedComponent,
    /// It covers a component that is not in the request, or whose value the proxy changes
    /// (`Via`, a hop-by-hop field, `Host`, a whole signature field the proxy adds a member to…).
    ChangedComponent,
}

impl SkipReason {
    /// The reason, as the metric and the audit record name it.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::MalformedSignatureInput => "malformed_signature_input",
            SkipReason::MalformedSignature => "malformed_signature",
            SkipReason::MalformedSignatureAgent => "malformed_signature_agent",
            SkipReason::UnsupportedComponent => "unsupported_component",
            SkipReason::ChangedComponent => "changed_component",
        }
    }
}

/// Why a client's signature was left as it is, uncovered by the proxy's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The kind.
    pub reason: SkipReason,
    /// What exactly (the component, the label).
    pub detail: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.detail)
    }
}

fn skip(reason: SkipReason, detail: impl Into<String>) -> Skipped {
    Skipped { reason, detail: detail.into() }
}

/// What [`Signing::sign_beside`] did about the client's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cosign {
    /// The proxy's signature covers these client labels.
    Covered(Vec<String>),
    /// The proxy signed on its own terms only.
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
    /// The members' keys of the three fields, and the text of those that do not parse: what
    /// the proxy's label must differ from.
    taken: Vec<String>,
    /// The client's labels and the union of what they cover, or why they cannot be covered.
    cover: Result<(Vec<String>, Vec<Covered>), Skipped>,
}

impl ClientSignature {
    /// The client's signature of the request `arrival` with `headers`, as it arrived; `None`
    /// when it carries neither `Signature` nor `Signature-Input`.
    pub fn read(arrival: &Target<'_>, headers: &HeaderMap) -> Option<ClientSignature> {
        if !headers.contains_key(&SIGNATURE) && !headers.contains_key(&SIGNATURE_INPUT) {
            return None;
        }
        let mut taken = Vec::new();
        let mut parsed = |name: &HeaderName| -> Option<Result<sfv::Dictionary, ()>> {
            let text = joined(headers, name)?;
            match text.as_deref().ok().map(|t| sfv::Parser::new(t).parse::<sfv::Dictionary>()) {
                Some(Ok(dict)) => {
                    taken.extend(dict.keys().map(|k| k.as_str().to_owned()));
                    Some(Ok(dict))
                }
                _ => {
                    taken.push(text.unwrap_or_default());
                    Some(Err(()))
                }
            }
        };
        let input = parsed(&SIGNATURE_INPUT);
        let signature = parsed(&SIGNATURE);
        let agent = parsed(&SIGNATURE_AGENT);
        let cover = cover(arrival, headers, input, signature, agent);
        Some(ClientSignature { taken, cover })
    }

    /// A label the client does not use: `sig1`, else `sig2`, … .
    fn free_label(&self) -> String {
        let free = |l: &str| !self.taken.iter().any(|t| t == l || t.contains(&format!("{l}=")));
        if free(LABEL) {
            return LABEL.to_owned();
        }
        (2..)
            .map(|n| format!("sig{n}"))
            .find(|l| free(l))
            .unwrap_or_else(|| "robots-proxy".to_owned())
    }
}

/// Every line of `name`, joined with `, ` (RFC 9421 §2.1); `None` when absent, `Err` with the
/// bytes as text (lossy) when a line is not visible ASCII.
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<Result<String, String>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
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

/// The client's labels and what they cover, with the values on arrival.
fn cover(
    arrival: &Target<'_>,
    headers: &HeaderMap,
    input: Option<Result<sfv::Dictionary, ()>>,
    signature: Option<Result<sfv::Dictionary, ()>>,
    agent: Option<Result<sfv::Dictionary, ()>>,
) -> Result<(Vec<String>, Vec<Covered>), Skipped> {
    use SkipReason::*;
    let input = match input {
        Some(Ok(d)) if !d.is_empty() => d,
        _ => return Err(skip(MalformedSignatureInput, "not a dictionary of signatures")),
    };
    let signature = match signature {
        Some(Ok(d)) => d,
        _ => return Err(skip(MalformedSignature, "not a dictionary")),
    };
    if let Some(Err(())) = agent {
        return Err(skip(MalformedSignatureAgent, "not a dictionary"));
    }
    let mut labels = Vec::with_capacity(input.len());
    let mut covered: Vec<Covered> = Vec::new();
    for (label, entry) in &input {
        let sfv::ListEntry::InnerList(list) = entry else {
            return Err(skip(MalformedSignatureInput, format!("{} is not an inner list", label)));
        };
        match signature.get(label.as_str()) {
            Some(sfv::ListEntry::Item(sfv::Item {
                bare_item: sfv::BareItem::ByteSequence(_),
                ..
            })) => {}
            _ => {
                return Err(skip(MalformedSignature, format!("no signature for {}", label)));
            }
        }
        for item in &list.items {
            let identifier = item.serialize();
            if covered.iter().any(|c| c.identifier == identifier) {
                continue;
            }
            let what = component(item).map_err(|e| skip(UnsupportedComponent, e))?;
            if let What::Field { name, key: None } = &what {
                if [&SIGNATURE, &SIGNATURE_INPUT, &SIGNATURE_AGENT].contains(&name) {
                    return Err(skip(
                        ChangedComponent,
                        format!("{identifier} (the whole field, which the proxy adds to)"),
                    ));
                }
            }
            let arrived = value(&what, arrival, headers)
                .map_err(|why| skip(ChangedComponent, format!("{identifier} {why}")))?;
            covered.push(Covered { identifier, what, arrived });
        }
        labels.push(label.as_str().to_owned());
    }
    Ok((labels, covered))
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

/// The value of `what` in the request `target` with `headers` (RFC 9421 §2.1, §2.2); `Err`
/// says why there is none.
fn value(what: &What, target: &Target<'_>, headers: &HeaderMap) -> Result<String, &'static str> {
    Ok(match what {
        What::Derived(Derived::Method) => target.method.to_owned(),
        What::Derived(Derived::Authority) => target.authority.to_owned(),
        What::Derived(Derived::Scheme) => target.scheme.to_owned(),
        What::Derived(Derived::Path) => target.path().to_owned(),
        What::Derived(Derived::Query) => format!("?{}", target.query().unwrap_or("")),
        What::Derived(Derived::TargetUri) => {
            let mut uri = format!("{}://{}{}", target.scheme, target.authority, target.path());
            if let Some(q) = target.query() {
                uri.push('?');
                uri.push_str(q);
            }
            uri
        }
        What::Field { name, key } => {
            let text = joined(headers, name).ok_or("is not in the request")?;
            let text = text.map_err(|_| "is not visible ASCII")?;
            let Some(key) = key else { return Ok(text) };
            let dict = sfv::Parser::new(&text)
                .parse::<sfv::Dictionary>()
                .map_err(|_| "is not a dictionary")?;
            let member = dict.get(key.as_str()).ok_or("has no such member")?;
            let one: sfv::List = vec![member.clone()];
            one.serialize().ok_or("has an empty member")?
        }
    })
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
    /// ([`Cosign::Covered`]); otherwise it covers the proxy's own components only and says why
    /// ([`Cosign::Skipped`]). Always a fresh signature (`signing.reuse` does not apply).
    /// `Ok((None, _))`, and `headers` unchanged, when none of the identity's keys signs at `now`.
    pub fn sign_beside(
        &self,
        target: &Target<'_>,
        headers: &mut HeaderMap,
        now: std::time::SystemTime,
        client: &ClientSignature,
    ) -> Result<(Option<&'a str>, Cosign), SigningError> {
        let outcome = match &client.cover {
            Err(skipped) => Cosign::Skipped(skipped.clone()),
            Ok((labels, covered)) => match unchanged(covered, target, headers) {
                Ok(()) => Cosign::Covered(labels.clone()),
                Err(skipped) => Cosign::Skipped(skipped),
            },
        };
        let Some(slot) = self.slot_at(now) else { return Ok((None, outcome)) };
        let label = client.free_label();
        let signer = self.signer;
        // The identifiers and the signature base's lines, the proxy's own first.
        let mut ids: Vec<String> = Vec::with_capacity(8);
        let mut base = String::with_capacity(512);
        let mut line = |id: String, value: &str, ids: &mut Vec<String>| {
            if !ids.contains(&id) {
                base.push_str(&id);
                base.push_str(": ");
                base.push_str(value);
                base.push('\n');
                ids.push(id);
            }
        };
        for c in signer.coverage.components() {
            let v = value(&What::Derived(derived(*c)), target, headers)
                .map_err(|e| SigningError::Fields(e.into()))?;
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
                    match value(&what, target, headers) {
                        Ok(v) => line(member(field.as_str(), l), &v, &mut ids),
                        // A label without a Signature-Agent member: not a Web Bot Auth one.
                        Err(_) if *field == SIGNATURE_AGENT => {}
                        Err(e) => return Err(SigningError::Fields(format!("{field}: {e}"))),
                    }
                }
            }
        }
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
        Ok((Some(key.keyid()), outcome))
    }
}

/// Whether every component the client covers has, in the request about to leave, the value it
/// had when the request arrived.
fn unchanged(covered: &[Covered], target: &Target<'_>, headers: &HeaderMap) -> Result<(), Skipped> {
    for c in covered {
        match value(&c.what, target, headers) {
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
mod tests {
    use super::*;

    fn target(path_and_query: &str) -> Target<'_> {
        Target { method: "GET", scheme: "http", authority: "origin.example", path_and_query }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    const INPUT: &str = r#"agent=("@method" "@authority" "@path" "signature-agent";key="agent");created=1;expires=2;keyid="k";tag="web-bot-auth""#;

    #[test]
    fn a_well_formed_client_signature_is_read_with_its_values() {
        let h = headers(&[
            ("signature-input", INPUT),
            ("signature", "agent=:AAAA:"),
            ("signature-agent", r#"agent="https://agent.example""#),
        ]);
        let client = ClientSignature::read(&target("/a?q"), &h).unwrap();
        let (labels, covered) = client.cover.as_ref().unwrap();
        assert_eq!(labels, &["agent"]);
        let values: Vec<_> = covered.iter().map(|c| c.arrived.as_str()).collect();
        assert_eq!(values, ["GET", "origin.example", "/a", "\"https://agent.example\""]);
        assert_eq!(client.free_label(), "sig1");
        assert!(unchanged(covered, &target("/a?other"), &h).is_ok(), "the query is not covered");
        let changed = unchanged(covered, &target("/b"), &h).unwrap_err();
        assert_eq!(changed.reason, SkipReason::ChangedComponent);
    }

    #[test]
    fn what_cannot_be_cosigned_says_why() {
        let reason = |pairs: &[(&str, &str)]| {
            let client = ClientSignature::read(&target("/"), &headers(pairs)).unwrap();
            client.cover.unwrap_err().reason
        };
        let sig = ("signature", "agent=:AAAA:");
        use SkipReason::*;
        assert_eq!(
            reason(&[("signature-input", "agent=(\"@authority\""), sig]),
            MalformedSignatureInput
        );
        assert_eq!(reason(&[("signature-input", "agent=\"x\""), sig]), MalformedSignatureInput);
        assert_eq!(reason(&[("signature-input", INPUT)]), MalformedSignature);
        assert_eq!(
            reason(&[("signature-input", INPUT), sig, ("signature-agent", "\"https://a\"")]),
            MalformedSignatureAgent
        );
        let input = |c: &str| format!("agent=({c});created=1");
        for c in ["\"@request-target\"", "\"@query-param\";name=\"a\"", "\"accept\";sf"] {
            assert_eq!(reason(&[("signature-input", &input(c)), sig]), UnsupportedComponent, "{c}");
        }
        assert_eq!(
            reason(&[("signature-input", &input("\"signature-agent\"")), sig]),
            ChangedComponent
        );
        assert_eq!(reason(&[("signature-input", &input("\"x-absent\"")), sig]), ChangedComponent);
    }

    #[test]
    fn the_label_avoids_the_clients() {
        let h =
            headers(&[("signature-input", "sig1=(\"@authority\")"), ("signature", "sig1=:AAAA:")]);
        assert_eq!(ClientSignature::read(&target("/"), &h).unwrap().free_label(), "sig2");
        let h = headers(&[("signature-input", "sig1=(broken"), ("signature", "sig2=:AAAA:")]);
        assert_eq!(ClientSignature::read(&target("/"), &h).unwrap().free_label(), "sig3");
        assert!(ClientSignature::read(&target("/"), &HeaderMap::new()).is_none());
    }
}
