//! The chain's state file beside the log (`crate::audit::anchor`), written by the sink.

use super::Sink;

impl Sink {
    /// Writes the chain's state beside the log (`anchor.rs`); a failure is logged only: the
    /// next start then has the file alone to go by.
    pub(super) fn save_state(&mut self) {
        let line = self.checkpoint_line.as_deref();
        let line = line.filter(|_| self.key.is_some());
        match super::anchor::save(&self.path, &self.chain, line) {
            Ok(()) => self.saved = Some((self.chain.sequence, self.chain.head)),
            Err(error) => {
                self.saved = None;
                tracing::debug!(path = %self.path.display(), %error, "cannot write the audit chain's state");
            }
        }
    }

    /// [`Sink::save_state`], unless the state file already holds the chain as it is (a
    /// checkpoint just saved it).
    pub(super) fn save_state_unless_saved(&mut self) {
        if self.saved != Some((self.chain.sequence, self.chain.head)) {
            self.save_state();
        }
    }
}
