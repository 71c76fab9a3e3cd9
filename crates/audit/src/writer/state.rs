//! The chain's state file beside the log (`crate::anchor`), written by the sink, and
//! the writer's own lines taken in (the last checkpoint, published for `GET /audit/checkpoint`).

use super::{LineEnd, Own, Sink, Writer};

impl Writer {
    /// Publishes each checkpoint's note to `latest` (`GET /audit/checkpoint`).
    pub(crate) fn publish_to(&mut self, latest: &super::super::LatestCheckpoint) {
        if let Some(sink) = self.sink.as_mut() {
            sink.latest = latest.clone();
        }
    }

    /// Feeds every line written whole, and each checkpoint, to the witnesses' `hub`.
    pub(crate) fn feed(&mut self, hub: std::sync::Arc<crate::witness::Hub>) {
        if let Some(sink) = self.sink.as_mut() {
            sink.witnesses = Some(hub);
        }
    }
}

impl Sink {
    /// A line that ends at `end`; with [`Own::None`], a caller's record.
    pub(super) fn line_end(&self, end: usize, leaf: crate::merkle::Hash, kind: Own) -> LineEnd {
        let pending = kind == Own::None;
        let (head, sequence) = (self.chain.head, self.chain.sequence);
        LineEnd { end, pending, head, sequence, leaf, kind }
    }

    /// Takes in the state the writer's own lines of `batch` change, for those that reached
    /// the file whole (`done` bytes): the restart is said, a checkpoint is the last one.
    pub(super) fn took_own(&mut self, batch: &[u8], ends: &[LineEnd], done: usize) {
        let mut start = 0;
        let mut signed = false;
        for line in ends.iter().take_while(|line| line.end <= done) {
            match &line.kind {
                Own::None => {}
                Own::Restart => self.restart = None,
                Own::Checkpoint(previous) => {
                    self.start_checkpoint = false;
                    self.checkpointed = line.sequence;
                    self.previous = Some(previous.clone());
                    self.checkpoint_line = Some(batch[start..line.end].to_vec());
                    self.latest.publish(&batch[start..line.end]);
                    signed = true;
                }
            }
            start = line.end;
        }
        if let Some(hub) = &self.witnesses {
            let mut start = 0;
            let whole = ends.iter().take_while(|line| line.end <= done).map(|line| {
                let bytes = &batch[start..line.end - 1];
                start = line.end;
                (bytes, matches!(line.kind, Own::Checkpoint(_)))
            });
            hub.took(whole);
        }
        if signed {
            self.save_state();
        }
    }

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
