//! [`Family::Authority`]: a rule written for one spelling of an authority refuses the request
//! made with every other spelling of it (case, a trailing dot, the default port written or an
//! empty one, Unicode or punycode, every IPv4 form, every IPv6 form, an IPv4-mapped IPv6 literal), with one
//! robots.txt fetch for all of them; and never applies to another authority (another scheme,
//! port, host or address). Spec README, "Fetching and caching robots.txt": one robots.txt per
//! authority; IDN hosts and their punycode form are the same authority.

use proptest::prelude::*;

use super::{sources_for, Ask, Family, Ports, Site, Who, TOKEN};

/// Spellings of one authority (`http://xn--bcher-kva.example`, port 80) in a request-target
/// (ASCII: a client sends an IDN host in punycode).
const NAMED: &[&str] = &[
    "xn--bcher-kva.example",
    "XN--BCHER-KVA.example",
    "Xn--Bcher-Kva.Example.",
    "xn--bcher-kva.example:80",
    "xn--bcher-kva.example.:80",
    "xn--bcher-kva.example:",
];

/// Spellings of the same authority a rule may be written with (an exception's `authorities`)
/// and no request-target carries: Unicode.
const NAMED_WRITTEN: &[&str] = &["bücher.example", "BÜCHER.Example", "bücher.example.:80"];

/// Spellings of one address (`http://127.0.0.1`, port 80).
const ADDRESSED: &[&str] = &[
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f.0.0.1",
    "0X7F.1",
    "00177.1",
    "127.0.0.1.",
    "127.0.0.1:80",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]:80",
];

/// Spellings of one IPv6 address (`http://[::1]`, port 80).
const ADDRESSED6: &[&str] =
    &["[::1]", "[0:0:0:0:0:0:0:1]", "[::0:1]", "[0::1]:80", "[0000::0001]", "[::1]:"];

/// Other authorities: another host or address, near the three above.
const OTHERS: &[&str] = &[
    "buecher.example",
    "xn--bcher-kva.example.org",
    "other.example",
    "example",
    "127.0.0.2",
    "[::2]",
    "128.1",
];

/// The same hosts on other ports: other authorities, which a rule written with a host alone
/// in configuration covers ([`Ports::AsWritten`]: `host` is any port).
const OTHER_PORTS: &[&str] = &[
    "xn--bcher-kva.example:8080",
    "xn--bcher-kva.example:81",
    "127.0.0.1:8080",
    "127.1:81",
    "[::1]:8080",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_rule_for_one_spelling_holds_for_every_spelling_and_no_other_authority(
        set in 0usize..3,
        written in any::<prop::sample::Index>(),
        asked in proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
        other in proptest::sample::select(OTHERS),
        port in proptest::sample::select(OTHER_PORTS),
    ) {
        let (spellings, extra) = match set {
            0 => (NAMED, NAMED_WRITTEN),
            1 => (ADDRESSED, &[][..]),
            _ => (ADDRESSED6, &[][..]),
        };
        // An empty port (`host:`) is the default one in a request-target (RFC 3986 §3.2.3);
        // configuration has no scheme to take a default from and refuses it at load.
        let all: Vec<&str> =
            spellings.iter().chain(extra).copied().filter(|w| !w.ends_with(':')).collect();
        let written = *written.get(&all);
        for s in sources_for(Family::Authority) {
            let mut site = Site::at(written);
            s.refuse(&mut site, "/private", TOKEN);
            // The requests come as they come; the first one fetches robots.txt.
            let mut asks = Vec::new();
            for i in &asked {
                asks.push(Ask { at: i.get(spellings).to_string(), ..Ask::path(&site, "/private/x") });
            }
            asks.push(Ask { at: other.to_string(), ..Ask::path(&site, "/private/x") });
            asks.push(Ask { at: port.to_string(), ..Ask::path(&site, "/private/x") });
            let (outcomes, work) = site.judge(&asks);
            let same = &outcomes[..asked.len()];
            for (ask, outcome) in asks.iter().zip(same) {
                prop_assert!(
                    outcome.enforced,
                    "{}: a rule written at {:?} lets {:?} through", s.name(), written, ask.at
                );
            }
            let elsewhere = outcomes[asked.len()];
            prop_assert!(
                !elsewhere.enforced,
                "{}: a rule written at {:?} refuses {:?}", s.name(), written, other
            );
            // Another port of the same host: the rule holds only where it names any port.
            let same_host = super::harness::authority_of(port).map(|a| a.host().to_owned())
                == Some(site.authority().host().to_owned());
            let unnamed = robots_proxy_authority::SiteName::parse(written).is_ok_and(|w| w.port().is_none());
            let any_port = s.ports() == Ports::AsWritten && unnamed;
            let expected = same_host && any_port;
            prop_assert_eq!(
                outcomes[asked.len() + 1].enforced, expected,
                "{}: a rule written at {:?} on {:?}", s.name(), written, port
            );
            // One robots.txt for every spelling, one for each other authority.
            prop_assert_eq!(work.fetches, 3, "{}: robots.txt fetches", s.name());
        }
    }
}

/// The same with the crawler's token asserted in its own header and with its user tied to it,
/// at one spelling each: the authority does not depend on who asks.
#[test]
fn every_spelling_holds_whoever_asks() {
    for s in sources_for(Family::Authority) {
        for (written, asked) in
            [("BÜCHER.example.", "xn--bcher-kva.example:80"), ("127.1", "[::ffff:127.0.0.1]")]
        {
            let mut site = Site::at(written);
            s.refuse(&mut site, "/private", TOKEN);
            for who in [Who::Header(TOKEN.into()), Who::Tied(TOKEN.into())] {
                let ask = Ask { at: asked.into(), who, ..Ask::path(&site, "/private/x") };
                assert!(site.outcome(&ask).enforced, "{}: {written} vs {asked}", s.name());
            }
        }
    }
}
