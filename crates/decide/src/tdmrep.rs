//! TDMRep through the policy: the proxy reaches `tdmrep.json` (kept by the cache, see
//! [`robots_proxy_sitefiles::wellknown`]) only here.

use std::sync::Arc;

use super::Policy;
use robots_proxy_authority::Authority;
use robots_proxy_sitefiles::wellknown::TdmSite;

impl Policy {
    /// What `authority`'s `/.well-known/tdmrep.json` says, fetched first when missing or
    /// expired; one fetch per authority per lifetime, however many requests ask.
    pub async fn tdmrep(&self, authority: &Authority) -> Arc<TdmSite> {
        self.store.tdmrep(authority).await
    }
}
