//! The crawler's product token, and how to find it in a `User-Agent` header.
//!
//! RFC 9309 §2.2.1: "Crawlers MUST use case-insensitive matching to find the group that matches
//! the product token". RFC 9309 makes a product token of letters, `_` and `-` only
//! (`ExampleBot`, `python-requests`, `Go-http-client`); real crawlers are also called `AI2Bot`,
//! `MJ12bot`, `360Spider`, `archive.org_bot` and `Kangaroo Bot`, and the sites that name them in
//! a group mean them. A token here may hold digits, `.` and single spaces between words too,
//! and is matched against the full names group lines write ([`super::parse::full_agent_name`];
//! `docs/engine.md`, "Crawler names beyond RFC 9309's tokens").

use std::fmt;

/// A crawler's product token: letters, digits, `_`, `-` and `.`, in words separated by single
/// spaces, compared case-insensitively.
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
    /// The string holds a character outside `A-Z a-z 0-9 _ - .`, or spaces other than single
    /// ones between words.
    #[error(
        "{0:?} is not a product token: only letters, digits, '_', '-' and '.' are allowed, \
         in words separated by single spaces"
    )]
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
        let words_ok = token.split(' ').all(|w| !w.is_empty() && w.bytes().all(is_token_byte));
        if !words_ok {
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
    ///    …). Inside comments, `name/version` entries count; an entry without a version counts
    ///    only right after `compatible` (`(compatible; GoogleOther)`, `(compatible; Yahoo!
    ///    Slurp; …)`) or when it says it is a crawler (`Bytespider`): so `Windows NT 10.0`,
    ///    `Win64`, `x64` and `en-US` are skipped.
    /// 3. The first candidate whose name says it is a crawler (`bot`, `crawl`, `spider`, `slurp`,
    ///    `fetch`, `scrap`, `archiv`) wins; otherwise the first candidate at all.
    ///
    /// A plain browser User-Agent has no candidate and gives `None`: then only the `*` groups
    /// apply.
    ///
    /// ```
    /// use robots_proxy_engine::ProductToken;
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
    super::parse::is_name_byte(b)
}

/// The candidate names of a User-Agent string, in order of appearance.
fn candidates(ua: &str) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let bytes = ua.as_bytes();
    /// Where an item stands: a product outside comments, an entry of a comment, or the entry of
    /// a comment right after its `compatible` entry (`(compatible; Bytespider; …)`).
    #[derive(Clone, Copy, PartialEq)]
    enum Place {
        Product,
        Comment,
        AfterCompatible,
    }
    // A name: letters, digits, `_`, `-`, `.`; it starts with a letter or a digit, does not end
    // with `.`, and has two letters at least (`360Spider`, `MJ12bot`, `archive.org_bot`; not
    // `10.0`, `x64`).
    fn candidate(name: &str) -> Option<&str> {
        if name.len() < 2 || !name.bytes().all(is_token_byte) || name.ends_with('.') {
            return None;
        }
        if !name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        if name.bytes().filter(u8::is_ascii_alphabetic).count() < 2 {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        if NOT_CRAWLERS.contains(&lower.as_str()) {
            return None;
        }
        Some(name)
    }
    fn says_crawler(name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        CRAWLER_WORDS.iter().any(|w| lower.contains(w))
    }
    fn push<'a>(item: &'a str, place: Place, out: &mut Vec<&'a str>) {
        let item = item.trim();
        if let Some(slash) = item.find('/') {
            let name = item[..slash].trim_end();
            if let Some(name) = candidate(name) {
                out.push(name);
            } else if place != Place::Product {
                // A name of several words before its version names a crawler when it says so
                // (`Kangaroo Bot/1.0`): single spaces only, each word a name's. Otherwise a word
                // that says it is a crawler (`archive.org_bot +http://…`).
                let words: Vec<&str> = name.split(' ').collect();
                let whole = words.len() > 1
                    && words.iter().all(|w| !w.is_empty() && w.bytes().all(is_token_byte))
                    && says_crawler(name);
                if whole {
                    out.push(name);
                } else {
                    let crawler_words = name.split_ascii_whitespace().filter(|w| says_crawler(w));
                    out.extend(crawler_words.filter_map(candidate));
                }
            }
            return;
        }
        match place {
            Place::Product => out.extend(candidate(item)),
            // A comment entry without a version names the crawler only when it follows
            // `compatible` (`(compatible; GoogleOther)`, `(compatible; Yahoo! Slurp; …)`) or
            // says it is a crawler (`bot`, `spider`, …): other versionless entries are platform
            // words (`Win64`, `x64`, `Linux`, `en-US`, `ARM`, `KHTML, like Gecko`). Each word
            // of the entry is weighed, so `Yahoo! Slurp` gives `Slurp`.
            Place::Comment | Place::AfterCompatible => {
                for word in item.split_ascii_whitespace() {
                    let Some(name) = candidate(word) else { continue };
                    let lower = name.to_ascii_lowercase();
                    if place == Place::AfterCompatible
                        || CRAWLER_WORDS.iter().any(|w| lower.contains(w))
                    {
                        out.push(name);
                    }
                }
            }
        }
    }
    // The place of the next comment entry: after a `compatible` entry, the one that follows.
    let place_after = |entry: &str| {
        if entry.trim().eq_ignore_ascii_case("compatible") {
            Place::AfterCompatible
        } else {
            Place::Comment
        }
    };
    let mut place = Place::Comment;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' => {
                if depth == 0 {
                    for word in ua[start..i].split_whitespace() {
                        push(word, Place::Product, &mut out);
                    }
                } else {
                    push(&ua[start..i], place, &mut out);
                }
                depth += 1;
                start = i + 1;
                place = Place::Comment;
            }
            b')' if depth > 0 => {
                push(&ua[start..i], place, &mut out);
                depth -= 1;
                start = i + 1;
                place = Place::Comment;
            }
            b';' | b',' if depth > 0 => {
                push(&ua[start..i], place, &mut out);
                place = place_after(&ua[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth == 0 {
        for word in ua[start..].split_whitespace() {
            push(word, Place::Product, &mut out);
        }
    } else {
        push(&ua[start..], place, &mut out);
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(ua: &str) -> Option<String> {
        ProductToken::from_user_agent(ua).map(|t| t.as_str().to_owned())
    }

    /// A User-Agent's candidate names, in order of appearance: the products before a comment
    /// one by one, the entry after a comment's `compatible`, and the products after the comment
    /// has closed (a plain comment's entry is no name); two-letter names count.
    #[test]
    fn candidates_come_in_order_of_appearance() {
        let got: Vec<_> =
            candidates("Go/1.2 Ab/3 (compatible; XyBot/1.0) Tail/2 More/3 (Zz)").collect();
        assert_eq!(got, ["Go", "Ab", "XyBot", "Tail", "More"]);
        let got: Vec<_> = candidates("Go/1.2 (compatible; XyBot/1.0) Tail/2 More/3").collect();
        assert_eq!(got, ["Go", "XyBot", "Tail", "More"]);
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

    /// Review-core N3: the published User-Agents of crawlers whose names hold digits, dots or
    /// spaces give those names (RFC 9309's tokens cannot hold them; the sites that name these
    /// crawlers in a group mean them), and configuration accepts them.
    #[test]
    fn crawler_names_with_digits_dots_and_spaces() {
        let cases = [
            ("Mozilla/5.0 (compatible) AI2Bot (+https://www.allenai.org/crawler)", "AI2Bot"),
            (
                "Mozilla/5.0 (compatible) Ai2Bot-Dolma (+https://www.allenai.org/crawler)",
                "Ai2Bot-Dolma",
            ),
            ("Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)", "MJ12bot"),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
                 Chrome/91.0.4472.124 Safari/537.36; 360Spider",
                "360Spider",
            ),
            (
                "Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)",
                "archive.org_bot",
            ),
            (
                "Mozilla/5.0 (compatible; Kangaroo Bot/1.0; +https://kangaroollm.com.au/kangaroo-bot/)",
                "Kangaroo Bot",
            ),
        ];
        for (ua, want) in cases {
            assert_eq!(token(ua).as_deref(), Some(want), "{ua}");
        }
        // A browser on a phone names its model before a build number: not a crawler.
        assert_eq!(
            token(
                "Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/UQ1A.240205.004) AppleWebKit/537.36 \
                 (KHTML, like Gecko) Chrome/120.0.6099.230 Mobile Safari/537.36"
            ),
            None
        );
        for name in ["AI2Bot", "360Spider", "archive.org_bot", "Kangaroo Bot", "MJ12bot"] {
            assert_eq!(ProductToken::new(name).unwrap().as_str(), name);
        }
        for bad in ["Kangaroo  Bot", " Bot", "Bot ", "a/b", "a;b", "a\tb"] {
            assert!(ProductToken::new(bad).is_err(), "{bad:?}");
        }
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

    /// The User-Agent strings today's major crawlers publish, verbatim (issue 26.3), and the
    /// token each must give. GoogleOther's `W.X.Y.Z` is Google's own placeholder for the Chrome
    /// version. Several name themselves in a comment without a version (Bytespider, PetalBot,
    /// GoogleOther, Slurp): those gave no token before.
    #[test]
    fn published_crawler_user_agents() {
        let cases = [
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.1; \
                 +https://openai.com/gptbot",
                "GPTBot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; \
                 +https://openai.com/bot",
                "ChatGPT-User",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; \
                 +https://openai.com/searchbot",
                "OAI-SearchBot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; \
                 +claudebot@anthropic.com)",
                "ClaudeBot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; \
                 +Claude-User@anthropic.com)",
                "Claude-User",
            ),
            ("CCBot/2.0 (https://commoncrawl.org/faq/)", "CCBot"),
            (
                "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile \
                 Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)",
                "Bytespider",
            ),
            (
                "Mozilla/5.0 (Linux; Android 7.0;) AppleWebKit/537.36 (KHTML, like Gecko) Mobile \
                 Safari/537.36 (compatible; PetalBot;+https://webmaster.petalsearch.com/site/petalbot)",
                "PetalBot",
            ),
            (
                "Mozilla/5.0 (compatible;PetalBot;+https://webmaster.petalsearch.com/site/petalbot)",
                "PetalBot",
            ),
            ("GoogleOther", "GoogleOther"),
            (
                "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 \
                 (KHTML, like Gecko) Chrome/W.X.Y.Z Mobile Safari/537.36 (compatible; GoogleOther)",
                "GoogleOther",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GoogleOther) \
                 Chrome/W.X.Y.Z Safari/537.36",
                "GoogleOther",
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like \
                 Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
                "Applebot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Amazonbot/0.1; \
                 +https://developer.amazon.com/support/amazonbot) Chrome/119.0.6045.214 Safari/537.36",
                "Amazonbot",
            ),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; \
                 +https://perplexity.ai/perplexitybot)",
                "PerplexityBot",
            ),
            (
                "meta-externalagent/1.1 \
                 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)",
                "meta-externalagent",
            ),
            (
                "Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)",
                "Slurp",
            ),
            ("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot"),
            (
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; \
                 +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
                "bingbot",
            ),
            ("DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "DuckDuckBot"),
            ("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", "YandexBot"),
            (
                "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
                "Baiduspider",
            ),
            (
                "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 \
                 (KHTML, like Gecko) Chrome/W.X.Y.Z Mobile Safari/537.36 (compatible; \
                 Googlebot/2.1; +http://www.google.com/bot.html)",
                "Googlebot",
            ),
        ];
        for (ua, want) in cases {
            assert_eq!(token(ua).as_deref(), Some(want), "{ua}");
        }
        // Google-Extended is a robots.txt token only: it never appears in a User-Agent, and
        // Googlebot's does not give it.
        for (ua, _) in cases {
            assert_ne!(token(ua).as_deref(), Some("Google-Extended"), "{ua}");
        }
    }

    /// Versionless comment entries count only after `compatible` or with a crawler word:
    /// platform words never become a token.
    #[test]
    fn platform_words_in_comments_are_not_tokens() {
        for ua in [
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/120.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Windows; U; Windows NT 5.1; en-US; rv:1.9.2) Gecko/20100115 \
             Firefox/3.6",
            "Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.2; ARM; Trident/6.0)",
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/120.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, \
             like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
        ] {
            assert_eq!(token(ua), None, "{ua}");
        }
    }

    #[test]
    fn tokens_are_letters_digits_underscore_dash_dot_and_single_spaces() {
        assert!(ProductToken::new("Foo_Bar-baz").is_ok());
        assert_eq!(ProductToken::new(""), Err(InvalidToken::Empty));
        assert!(ProductToken::new("foo/1.0").is_err());
        assert!(ProductToken::new("foo*").is_err());
        // Digits are part of real crawlers' names (review-core N3: AI2Bot, MJ12bot).
        assert!(ProductToken::new("foo1").is_ok());
        assert_eq!(ProductToken::new("FooBot").unwrap().lowercase(), "foobot");
        assert_eq!(token(""), None);
        assert_eq!(token("((((;;;)"), None);
    }

    /// A `)` that closes no comment is an ordinary character of the product list: it neither
    /// ends a comment nor panics (a survivor of the engine's mutation run: no test had one).
    #[test]
    fn a_stray_closing_parenthesis_is_no_comment_end() {
        assert_eq!(token("ExampleBot/1.0)").as_deref(), Some("ExampleBot"));
        assert_eq!(token(") ExampleBot/1.0").as_deref(), Some("ExampleBot"));
        assert_eq!(
            token("Mozilla/5.0) (compatible; ExampleBot/1.0)").as_deref(),
            Some("ExampleBot")
        );
    }

    /// A token is written as it was given, case and all.
    #[test]
    fn a_token_displays_as_given() {
        assert_eq!(ProductToken::new("FooBot").unwrap().to_string(), "FooBot");
    }

    /// A token's debug form shows it as given.
    #[test]
    fn a_token_debugs_as_given() {
        assert_eq!(
            format!("{:?}", ProductToken::new("FooBot").unwrap()),
            "ProductToken(\"FooBot\")"
        );
    }

    /// What follows a comment starts right after its `)`, with or without a space (a survivor
    /// of the engine's mutation run: starting a byte early or late lost the product).
    #[test]
    fn products_after_a_comment_start_after_it() {
        for ua in ["Go/1 (compatible; XyBot) Tail/2", "Go/1 (compatible; XyBot)Tail/2"] {
            let got: Vec<_> = candidates(ua).collect();
            assert_eq!(got, ["Go", "XyBot", "Tail"], "{ua}");
        }
    }
}
