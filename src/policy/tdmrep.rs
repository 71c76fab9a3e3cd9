//! TDMRep through the policy: the proxy reaches `tdmrep.json` (kept by the cache, see
//! [`crate::cache::wellknown`]) only here.

use std::sync::Arc;

use super::Policy;
use crate::authority::Authority;
use crate::cache::wellknown::TdmSite;

impl Policy {
    /// What `authority`'s `/.well-known/tdmrep.json` says, fetched first when missing or
    /// expired; one fetch per authority per lifetime, however many requests ask.
    pub async fn tdmrep(&self, authority: &Authority) -> Arc<TdmSite> {
        self.store.tdmrep(authority).await
    }
}
