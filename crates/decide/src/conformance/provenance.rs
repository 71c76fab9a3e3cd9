//! [`Family::Provenance`]: a source's refusal holds for the crawler's token however it came
//! (asserted in User-Agent or in the token header, the configured default, or known from
//! credentials); a privilege
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
/// header, the configured default (asserted too: nobody proved it), tied to the authenticated
/// user.
fn every_way(token: &str, user_agent: &str) -> [Who; 4] {
    [
        Who::UserAgent(user_agent.into()),
        Who::Header(token.into()),
        Who::Default,
        Who::Tied(token.into()),
    ]
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
            let asks = |site: &Site| -> Vec<Ask> {
                every_way(&token, &user_agent)
                    .into_iter()
                    .map(|who| Ask { who, ..Ask::path(site, &path) })
                    .collect()
            };
            let (outcomes, _) = site.judge(&asks(&site));
            for (ask, outcome) in asks(&site).iter().zip(outcomes) {
                prop_assert!(outcome.enforced, "{} lets {:?} through", s.name(), ask.who);
            }
            for privilege in PRIVILEGES {
                let mut granted = site.clone();
                (privilege.grant)(&mut granted, TOKEN);
                let (outcomes, _) = granted.judge(&asks(&granted));
                for (ask, outcome) in asks(&granted).iter().zip(outcomes) {
                    let tied = matches!(ask.who, Who::Tied(_));
                    let lifted = tied && privilege.lifts.contains(&s.ground());
                    prop_assert_eq!(
                        outcome.enforced, !lifted,
                        "{} with {} granted to {}, asked by {:?}",
                        s.name(), privilege.name, TOKEN, ask.who
                    );
                }
            }
        }
    }
}
