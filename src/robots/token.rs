//! The crawler's product token, and how to find it in a `User-Agent` header.
//!
//! RFC 9309 §2.2.1: "Crawlers MUST use case-insensitive matching to find the group that matches
//! the product token". A product token is made of letters, `_` and `-` only (`ExampleBot`,
//! `python-requests`, `Go-http-client`).

use std::fmt;

/// A crawler's product token: letters, `_` and `-`, compared case-insensitively.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ProductToken {
    original: Box<str>,
    lowercase: Box<str>,
    /// [`lookup_key`] of `lowercase`, computed once so that finding a token's group compares
    /// integers rather than strings.
    key: u64,
}

/// The first eight bytes of a lower-cased token, big-endian, zero-padded: ordering by this key
/// and then by the bytes is the same as ordering by the bytes.
pub(crate) fn lookup_key(lowercase: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    let n = lowercase.len().min(8);
    k[..n].copy_from_slice(&lowercase[..n]);
    u64::from_be_bytes(k)
}

/// Why a string is not a product token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidToken {
    /// The string is empty.
    #[error("a product token cannot be empty")]
    Empty,
    /// The string holds a character outside `A-Z a-z _ -`.
    #[error("{0:?} is not a product token: only letters, '_' and '-' are allowed")]
    BadCharacter(String),
}

/// Names in User-Agent strings that say which browser engine or platform is in use, not which
/// crawler: they are never taken as the product token.
const NOT_CRAWLERS: &[&str] = &[
    "mozilla",
    "applewebkit",
    "webkit",
    "khtml",
    "like",
    "gecko",
    "chrome",
    "chromium",
    "headlesschrome",
    "safari",
    "mobile",
    "firefox",
    "edg",
    "edge",
    "edga",
    "edgios",
    "opr",
    "opera",
    "presto",
    "version",
    "crios",
    "fxios",
    "samsungbrowser",
    "ucbrowser",
    "yabrowser",
    "vivaldi",
    "trident",
    "msie",
    "compatible",
    "windows",
    "linux",
    "macintosh",
    "android",
    "iphone",
    "ipad",
    "ubuntu",
    "x",
    "u",
    "cpu",
    "intel",
    "mac",
    "os",
    "nt",
    "rv",
    "wow",
    "win",
    "build",
    "silk",
    "kindle",
];

/// Words that mark a name as a crawler's when several names are candidates.
const CRAWLER_WORDS: &[&str] = &["bot", "crawl", "spider", "slurp", "fetch", "scrap", "archiv"];

impl ProductToken {
    /// Makes a token from a string that must already be one.
    pub fn new(token: &str) -> Result<Self, InvalidToken> {
        if token.is_empty() {
            return Err(InvalidToken::Empty);
        }
        if !token.bytes().all(is_token_byte) {
            return Err(InvalidToken::BadCharacter(token.to_owned()));
        }
        let lowercase: Box<str> = token.to_ascii_lowercase().into();
        let key = lookup_key(lowercase.as_bytes());
        Ok(ProductToken { original: token.into(), lowercase, key })
    }

    /// Finds the crawler's product token in a `User-Agent` header value.
    ///
    /// The heuristic:
    ///
    /// 1. The header is cut into products (`name/version`) and the entries of parenthesised
    ///    comments, split at `;` (`(compatible; ExampleBot/0.1; +https://…)`).
    /// 2. A name is a candidate if it is made of letters, `_` and `-` only and is not the name of
    ///    a browser engine or platform (`Mozilla`, `AppleWebKit`, `Chrome`, `Safari`, `Windows`,
    ///    …). Inside comments only `name/version` entries count, so `Windows NT 10.0` is skipped.
    /// 3. The first candidate whose name says it is a crawler (`bot`, `crawl`, `spider`, `slurp`,
    ///    `fetch`, `scrap`, `archiv`) wins; otherwise the first candidate at all.
    ///
    /// A plain browser User-Agent has no candidate and gives `None`: then only the `*` groups
    /// apply.
    ///
    /// ```
    /// use robots_proxy::robots::ProductToken;
    /// let token = |ua| ProductToken::from_user_agent(ua).map(|t| t.as_str().to_owned());
    /// assert_eq!(
    ///     token("Mozilla/5.0 (compatible; ExampleBot/0.1; +https://www.example.com/bot.html)"),
    ///     Some("ExampleBot".into())
    /// );
    /// assert_eq!(token("python-requests/2.31.0"), Some("python-requests".into()));
    /// assert_eq!(token("Scrapy/2.11 (+https://scrapy.org)"), Some("Scrapy".into()));
    /// assert_eq!(token("curl/8.5.0"), Some("curl".into()));
    /// assert_eq!(
    ///     token("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
    ///            Chrome/120.0.0.0 Safari/537.36"),
    ///     None
    /// );
    /// ```
    pub fn from_user_agent(user_agent: &str) -> Option<Self> {
        let mut first: Option<&str> = None;
        for candidate in candidates(user_agent) {
            let lower = candidate.to_ascii_lowercase();
            if CRAWLER_WORDS.iter().any(|w| lower.contains(w)) {
                return ProductToken::new(candidate).ok();
            }
            first.get_or_insert(candidate);
        }
        first.and_then(|c| ProductToken::new(c).ok())
    }

    /// Reads `--agent`-style input: a product token as it is, or else a whole User-Agent string
    /// from which the token is found by [`ProductToken::from_user_agent`].
    pub fn from_token_or_user_agent(input: &str) -> Option<Self> {
        let input = input.trim();
        ProductToken::new(input).ok().or_else(|| Self::from_user_agent(input))
    }

    /// The token as it was written.
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// The token in lower case, the form robots.txt groups are looked up by.
    pub fn lowercase(&self) -> &str {
        &self.lowercase
    }

    /// The token's [`lookup_key`].
    pub(crate) fn lookup_key(&self) -> u64 {
        self.key
    }
}

impl fmt::Display for ProductToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}

impl fmt::Debug for ProductToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProductToken({:?})", self.original)
    }
}

impl std::str::FromStr for ProductToken {
    type Err = InvalidToken;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProductToken::new(s)
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'-'
}

/// The candidate names of a User-Agent string, in order of appearance.
fn candidates(ua: &str) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let bytes = ua.as_bytes();
    fn push<'a>(item: &'a str, in_comment: bool, out: &mut Vec<&'a str>) {
        let item = item.trim();
        let (name, has_version) = match item.find('/') {
            Some(slash) => (&item[..slash], true),
            None => (item, false),
        };
        if in_comment && !has_version {
            return;
        }
        if name.len() < 2 || !name.bytes().all(is_token_byte) {
            return;
        }
        if !name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) {
            return;
        }
        let lower = name.to_ascii_lowercase();
        if NOT_CRAWLERS.contains(&lower.as_str()) {
            return;
        }
        out.push(name);
    }
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => {
                if depth == 0 {
                    for word in ua[start..i].split_whitespace() {
                        push(word, false, &mut out);
                    }
                } else {
                    push(&ua[start..i], true, &mut out);
                }
                depth += 1;
                start = i + 1;
            }
            b')' if depth > 0 => {
                push(&ua[start..i], true, &mut out);
                depth -= 1;
                start = i + 1;
            }
            b';' | b',' if depth > 0 => {
                push(&ua[start..i], true, &mut out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth == 0 {
        for word in ua[start..].split_whitespace() {
            push(word, false, &mut out);
        }
    } else {
        push(&ua[start..], true, &mut out);
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(ua: &str) -> Option<String> {
        ProductToken::from_user_agent(ua).map(|t| t.as_str().to_owned())
    }

    #[test]
    fn issue_examples() {
        assert_eq!(
            token("Mozilla/5.0 (compatible; ExampleBot/0.1; +https://www.example.com/bot.html)")
                .as_deref(),
            Some("ExampleBot")
        );
        assert_eq!(token("python-requests/2.31.0").as_deref(), Some("python-requests"));
        assert_eq!(token("Scrapy/2.11 (+https://scrapy.org)").as_deref(), Some("Scrapy"));
        assert_eq!(token("curl/8.5.0").as_deref(), Some("curl"));
        assert_eq!(
            token(
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like \
                 Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0"
            ),
            None
        );
        assert_eq!(
            token("Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:121.0) Gecko/20100101 Firefox/121.0"),
            None
        );
    }

    #[test]
    fn well_known_crawlers() {
        let cases = [
            ("Googlebot/2.1 (+http://www.google.com/bot.html)", "Googlebot"),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; \
                 +http://www.google.com/bot.html) Chrome/120.0.0.0 Safari/537.36",
                "Googlebot",
            ),
            ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot"),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; \
                 +https://openai.com/gptbot",
                "GPTBot",
            ),
            (
                "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
                "facebookexternalhit",
            ),
            ("Wget/1.21.4", "Wget"),
            ("Go-http-client/1.1", "Go-http-client"),
            ("ExampleBot", "ExampleBot"),
            ("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", "YandexBot"),
        ];
        for (ua, want) in cases {
            assert_eq!(token(ua).as_deref(), Some(want), "{ua}");
        }
    }

    #[test]
    fn tokens_are_letters_underscore_dash() {
        assert!(ProductToken::new("Foo_Bar-baz").is_ok());
        assert_eq!(ProductToken::new(""), Err(InvalidToken::Empty));
        assert!(ProductToken::new("foo/1.0").is_err());
        assert!(ProductToken::new("foo1").is_err());
        assert_eq!(ProductToken::new("FooBot").unwrap().lowercase(), "foobot");
        assert_eq!(token(""), None);
        assert_eq!(token("((((;;;)"), None);
    }
}
