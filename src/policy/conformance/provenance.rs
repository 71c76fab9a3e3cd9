//! [`Family::Provenance`]: a source's refusal holds for the crawler's token however it came
//! (asserted in User-Agent, in the token header, or known from credentials); a privilege
//! granted to a token ([`super::PRIVILEGES`]: report-only scope, an allow exception, a usage
//! lift) follows the token only when it is known from credentials, never the same token
//! asserted (`policy::claim`).

use proptest::prelude::*;

use super::{sources_for, Ask, Family, Site, Who, PRIVILEGES, TOKEN};

/// How a client may write the crawler's token: its case, and the User-Agent around it.
fn spelled() -> impl Strategy<Value = (String, String)> {
    let case = proptest::sample::select(&["TrainBot", "trainbot", "TRAINBOT", "tRAINbOT"][..]);
    let around = proptest::sample::select(
        &[
            "{}",
            "{}/1.0",
            "Mozilla/5.0 (compatible; {}/2.1; +https://example.test/bot)",
            "{}/1.0 (+https://example.test) libcurl/8",
        ][..],
    );
    (case, around).prop_map(|(t, a)| (t.to_owned(), a.replace("{}", t)))
}

/// Every way a request may carry `token`: asserted in User-Agent, asserted in the token
/// header, tied to the authenticated user.
fn every_way(token: &str, user_agent: &str) -> [Who; 3] {
    [Who::UserAgent(user_agent.into()), Who::Header(token.into()), Who::Tied(token.into())]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn refusals_hold_for_every_provenance_and_privileges_follow_credentials_only(
        (token, user_agent) in spelled(),
        rest in proptest::sample::select(&["", "x", "a/b?c=1", "%2e%2e/y"][..]),
    ) {
        let path = format!("/private/{rest}");
        for s in sources_for(Family::Provenance) {
            let mut site = Site::new();
            s.refuse(&mut site, "/private", TOKEN);
            for who in every_way(&token, &user_agent) {
                let ask = Ask { who: who.clone(), ..Ask::path(&site, &path) };
                prop_assert!(site.outcome(&ask).enforced, "{} lets {:?} through", s.name(), who);
            }
            for privilege in PRIVILEGES {
                let mut granted = site.clone();
                (privilege.grant)(&mut granted, TOKEN);
                for who in every_way(&token, &user_agent) {
                    let ask = Ask { who: who.clone(), ..Ask::path(&granted, &path) };
                    let enforced = granted.outcome(&ask).enforced;
                    let lifted = matches!(who, Who::Tied(_)) && privilege.lifts.contains(&s.ground());
                    prop_assert_eq!(
                        enforced, !lifted,
                        "{} with {} granted to {}, asked by {:?}",
                        s.name(), privilege.name, TOKEN, who
                    );
                }
            }
        }
    }
}
