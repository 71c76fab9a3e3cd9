//! Describing errors for people: an error and its causes on one line.

use std::error::Error as StdError;

/// An error and its causes on one line (`client error (Connect): tcp connect error: …`), each
/// cause added only when the text so far does not already say it. For logs, 502 bodies and
/// `FetchOutcome::Network` in the site-file store.
pub fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}
