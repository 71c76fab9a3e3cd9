//! AI usage preferences: what fetched content may be used for.
//!
//! Two vocabularies say it, both as lines of a robots.txt group:
//!
//! * the IETF AI Preferences drafts: `Content-Usage: [path] train-ai=n, search=y`
//!   (draft-ietf-aipref-attach), whose preferences are a structured-field dictionary
//!   (RFC 9651) with values `y` / `n`; the same dictionary can come in a `Content-Usage`
//!   response header;
//! * Cloudflare's Content Signals: `Content-Signal: search=yes, ai-train=no`.
//!
//! The project's decisions (`shared/spec/README.md`, "AI usage preferences"):
//!
//! * the optional path matches like `allow` / `disallow`; the rule with the longest matching path
//!   applies, and rules without a path apply to every path (length 0);
//! * statements that apply together (rules with equally long paths, both vocabularies, robots.txt
//!   and the response header) combine per category, most restrictive first: any "no" →
//!   disallowed, else any "yes" → allowed, else unknown;
//! * a path that robots.txt disallows is decided by allow/disallow alone (no preference);
//! * the category labels are data ([`VOCABULARY`]), since the drafts are not final.
//!
//! Parsing is lenient: a malformed dictionary member is skipped, never fatal.

use std::fmt;

use super::normalize;
pub use super::pattern::PatternReading;
use super::pattern::ReadPattern;

/// A use of content that a site can state a preference about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Category {
    /// Training AI models (`train-ai`; Content Signals `ai-train`).
    TrainAi,
    /// Use as input to a generative AI model (`ai-use`, from draft-ietf-aipref-vocab-02 only;
    /// Content Signals `ai-input`).
    AiUse,
    /// Building a search index (`search`).
    Search,
}

impl Category {
    /// Every category, in a fixed order (indices of [`UsagePreferences`]).
    pub const ALL: [Category; 3] = [Category::TrainAi, Category::AiUse, Category::Search];

    /// The IETF vocabulary's label (`train-ai`, `ai-use`, `search`).
    pub fn label(self) -> &'static str {
        VOCABULARY.iter().find(|(_, c)| *c == self).map_or("?", |(l, _)| l)
    }

    /// Reads an IETF label or a Content Signals label.
    pub fn from_label(label: &str) -> Option<Category> {
        let label = label.trim();
        VOCABULARY
            .iter()
            .chain(SIGNAL_VOCABULARY)
            .find(|(l, _)| l.eq_ignore_ascii_case(label))
            .map(|(_, c)| *c)
    }

    fn index(self) -> usize {
        match self {
            Category::TrainAi => 0,
            Category::AiUse => 1,
            Category::Search => 2,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The IETF vocabulary (draft-ietf-aipref-vocab): label → category.
pub const VOCABULARY: &[(&str, Category)] =
    &[("train-ai", Category::TrainAi), ("ai-use", Category::AiUse), ("search", Category::Search)];

/// Cloudflare's Content Signals labels → the IETF categories they correspond to.
pub(crate) const SIGNAL_VOCABULARY: &[(&str, Category)] =
    &[("ai-train", Category::TrainAi), ("ai-input", Category::AiUse), ("search", Category::Search)];

/// A site's preference for one category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Preference {
    /// The use is allowed (`y`, `yes`).
    Allow,
    /// The use is not allowed (`n`, `no`).
    Disallow,
    /// Nothing was said.
    #[default]
    Unknown,
}

impl Preference {
    /// Combines two statements: any disallow wins, then any allow.
    pub fn combine(self, other: Preference) -> Preference {
        match (self, other) {
            (Preference::Disallow, _) | (_, Preference::Disallow) => Preference::Disallow,
            (Preference::Allow, _) | (_, Preference::Allow) => Preference::Allow,
            _ => Preference::Unknown,
        }
    }

    /// `y`, `n` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Allow => "y",
            Preference::Disallow => "n",
            Preference::Unknown => "unknown",
        }
    }
}

/// Which line form a statement came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Vocabulary {
    /// `Content-Usage` (IETF).
    ContentUsage,
    /// `Content-Signal` (Cloudflare).
    ContentSignal,
}

/// One `Content-Usage` or `Content-Signal` line of a group.
#[derive(Debug, Clone)]
pub struct UsageRule {
    /// The canonical path pattern (empty when the rule applies to every path), with its
    /// decoded reading.
    pattern: ReadPattern,
    line: u32,
    vocabulary: Vocabulary,
    prefs: Vec<(Category, Preference)>,
}

impl UsageRule {
    /// Reads the value of a `Content-Usage` line: an optional path, then a dictionary.
    /// `None` when the line states nothing usable.
    pub(crate) fn content_usage(value: &[u8], line: u32) -> Option<UsageRule> {
        Self::read(value, line, Vocabulary::ContentUsage)
    }

    /// Reads the value of a `Content-Signal` line (same form, Content Signals labels and
    /// `yes` / `no` values).
    pub(crate) fn content_signal(value: &[u8], line: u32) -> Option<UsageRule> {
        Self::read(value, line, Vocabulary::ContentSignal)
    }

    fn read(value: &[u8], line: u32, vocabulary: Vocabulary) -> Option<UsageRule> {
        let text = String::from_utf8_lossy(value);
        let text = text.trim();
        let (path, prefs) = if text.starts_with('/') {
            match text.find([' ', '\t']) {
                Some(end) => (&text[..end], &text[end..]),
                None => (text, ""),
            }
        } else {
            ("", text)
        };
        let prefs = match vocabulary {
            Vocabulary::ContentUsage => parse_preferences(prefs),
            Vocabulary::ContentSignal => parse_signals(prefs),
        };
        if prefs.is_empty() {
            return None;
        }
        // A pattern like `allow`/`disallow` ones: a `$` that is not final is `%24`, as in the
        // path it is matched against.
        let mut pattern = Vec::with_capacity(path.len() + 4);
        let priority = normalize::normalize_pattern_into(path.as_bytes(), &mut pattern) as u32;
        // ASCII by construction (see `normalize`).
        let pattern = String::from_utf8(pattern).unwrap_or_default();
        let pattern = ReadPattern::new(pattern, priority);
        Some(UsageRule { pattern, line, vocabulary, prefs })
    }

    /// The bytes it holds on the heap (its patterns and preferences), for the cache's weight.
    pub(crate) fn heap_size(&self) -> usize {
        self.pattern.heap_size()
            + self.prefs.capacity() * std::mem::size_of::<(Category, Preference)>()
    }

    /// Whether the pattern reads differently decoded.
    pub(crate) fn has_decoded_pattern(&self) -> bool {
        self.pattern.has_decoded()
    }

    /// The priority with which the rule applies to `path` read as `reading`, or `None`
    /// ([`ReadPattern::matches_as`]; a rule without a path applies to every path).
    fn applies_as(&self, path: &[u8], reading: PatternReading) -> Option<u32> {
        self.pattern.matches_as(path, reading)
    }

    /// The path pattern (canonical form), or `""` for every path.
    pub fn path(&self) -> &str {
        self.pattern.as_written()
    }

    /// The 1-based line number.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Which vocabulary the line used.
    pub fn vocabulary(&self) -> Vocabulary {
        self.vocabulary
    }

    /// The preferences the line states.
    pub fn preferences(&self) -> &[(Category, Preference)] {
        &self.prefs
    }
}

/// Parses an IETF usage preference dictionary (a `Content-Usage` line of robots.txt or the
/// `Content-Usage` response header) as draft-ietf-aipref-vocab (-07, -08, and the editor's
/// copy) says: an RFC 9651 Dictionary, parsed strictly ([`sfv`]). If the Dictionary does not
/// parse (`TRAIN-AI=Y`: keys are lower case; `train-ai=y, %%%`; `=n`), every preference is
/// unknown. Otherwise each label's *last* value counts (RFC 9651 §4.2.2: a later member
/// replaces an earlier one), and only the tokens `y` and `n` state a preference: any other
/// value (`yes`, the string `"n"`, a bare `train-ai` which is the boolean true, an inner list)
/// leaves it unknown, so `train-ai=y, train-ai="n"` is unknown, never allow. Parameters are
/// ignored; labels the vocabulary does not define (a Content Signals label such as `ai-train`)
/// are ignored. Unknown is what `usage.unknown` decides, so a broken dictionary never reads
/// as allow.
///
/// The labels are those of draft-ietf-aipref-vocab-07 and -08 (`train-ai`, `search`), plus
/// `ai-use`, which only draft -02 defined and which is still accepted.
///
/// One reading more, the most restrictive of what can be read (issue 42, M3): when the
/// Dictionary does not parse as a whole (one byte outside ASCII in a parameter, a stray
/// member), a member that reads on its own as a vocabulary label with the token `n`
/// (`train-ai=n;note="café"`) still states "disallow". A broken field never states "allow".
pub fn parse_preferences(text: &str) -> Vec<(Category, Preference)> {
    read_preferences(text).0
}

/// [`parse_preferences`], and whether `text` parsed as a Dictionary (`false`: only the
/// disallows of the broken field were read).
pub(crate) fn read_preferences(text: &str) -> (Vec<(Category, Preference)>, bool) {
    let Ok(dictionary) = sfv::Parser::new(text.trim()).parse::<sfv::Dictionary>() else {
        return (disallows_of_a_broken_field(text), false);
    };
    let mut out: Vec<(Category, Preference)> = Vec::new();
    for (key, member) in &dictionary {
        let Some(&(_, category)) = VOCABULARY.iter().find(|(l, _)| *l == key.as_str()) else {
            continue;
        };
        let token = match member {
            sfv::ListEntry::Item(item) => item.bare_item.as_token().map(|t| t.as_str()),
            sfv::ListEntry::InnerList(_) => None,
        };
        let pref = match token {
            Some("y") => Preference::Allow,
            Some("n") => Preference::Disallow,
            _ => continue,
        };
        out.push((category, pref));
    }
    (out, true)
}

/// The "disallow" statements that can still be read in a `Content-Usage` field that is not a
/// valid Dictionary: members `label=n` (parameters ignored) whose label is the vocabulary's,
/// as written (lower case). See [`parse_preferences`].
fn disallows_of_a_broken_field(text: &str) -> Vec<(Category, Preference)> {
    let mut out: Vec<(Category, Preference)> = Vec::new();
    for member in text.split(',') {
        let member = member.split(';').next().unwrap_or("").trim();
        let Some((key, value)) = member.split_once('=') else { continue };
        let Some(&(_, category)) = VOCABULARY.iter().find(|(l, _)| *l == key.trim()) else {
            continue;
        };
        if value.trim() == "n" && !out.iter().any(|(c, _)| *c == category) {
            out.push((category, Preference::Disallow));
        }
    }
    out
}

/// Parses a `Content-Signal` line's value (Cloudflare's Content Signals) leniently:
/// `search=yes, ai-input=yes, ai-train=no` (dictionary syntax; parameters after `;` ignored),
/// its labels and the IETF ones, `yes`/`no` and `y`/`n`, any case. Members with unknown labels
/// or values are skipped, and so are members whose value is not a bare token; a later member
/// for the same category replaces an earlier one. Only `Content-Signal` lines are read this
/// way: `Content-Usage` is read strictly ([`parse_preferences`]).
pub(crate) fn parse_signals(text: &str) -> Vec<(Category, Preference)> {
    let mut out: Vec<(Category, Preference)> = Vec::new();
    for member in text.split(',') {
        let member = member.split(';').next().unwrap_or("").trim();
        let Some((key, value)) = member.split_once('=') else { continue };
        let Some(category) = Category::from_label(key) else { continue };
        // The value must be a bare token (RFC 9651): `train-ai="n"` is a string, not the token
        // `n`, and the vocabulary (draft-ietf-aipref-vocab-07 and -08) treats such a member as
        // unknown.
        let value = value.trim();
        let pref = if value.eq_ignore_ascii_case("y") || value.eq_ignore_ascii_case("yes") {
            Preference::Allow
        } else if value.eq_ignore_ascii_case("n") || value.eq_ignore_ascii_case("no") {
            Preference::Disallow
        } else {
            continue;
        };
        match out.iter_mut().find(|(c, _)| *c == category) {
            Some(slot) => slot.1 = pref,
            None => out.push((category, pref)),
        }
    }
    out
}

/// Where one category's effective preference came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stated {
    /// The combined preference.
    pub preference: Preference,
    /// The robots.txt line that decided it (the first disallowing, else allowing line).
    pub line: Option<u32>,
    /// Whether a response header contributed.
    pub from_header: bool,
    /// Another opt-out that contributed, by name (`X-Robots-Tag`, `tdmrep.json`,
    /// `tdm-reservation header`, `meta`; see [`super::optout`]).
    pub other: Option<&'static str>,
}

/// Each category's effective preference for one URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsagePreferences {
    stated: [Stated; 3],
}

impl UsagePreferences {
    /// The preference for `category`, with where it came from.
    pub fn get(&self, category: Category) -> Stated {
        self.stated[category.index()]
    }

    /// Whether nothing is known for any category.
    pub fn is_unknown(&self) -> bool {
        self.stated.iter().all(|s| s.preference == Preference::Unknown)
    }

    /// Combines another URL's preferences in, per category the most restrictive (a proxy
    /// that decides on several readings of one path combines theirs).
    pub fn combine(&mut self, other: &UsagePreferences) {
        for category in Category::ALL {
            let theirs = other.get(category);
            let slot = &mut self.stated[category.index()];
            let combined = slot.preference.combine(theirs.preference);
            if combined != slot.preference {
                slot.line = theirs.line;
            }
            slot.preference = combined;
            slot.from_header |= theirs.from_header;
            slot.other = slot.other.or(theirs.other);
        }
    }

    /// Adds one statement from robots.txt line `line`.
    pub(crate) fn add_robots(&mut self, category: Category, pref: Preference, line: u32) {
        let slot = &mut self.stated[category.index()];
        let combined = slot.preference.combine(pref);
        if combined != slot.preference || (slot.line.is_none() && pref == combined) {
            slot.line = Some(line);
        }
        slot.preference = combined;
    }

    /// Forgets what was stated for `category`: it becomes unknown.
    pub(crate) fn forget(&mut self, category: Category) {
        self.stated[category.index()] = Stated::default();
    }

    /// Combines a statement of another opt-out ([`super::optout`]) in, named `source`.
    pub fn add_signal(&mut self, category: Category, pref: Preference, source: &'static str) {
        let slot = &mut self.stated[category.index()];
        let combined = slot.preference.combine(pref);
        if (combined != slot.preference || pref == combined) && slot.other.is_none() {
            slot.other = Some(source);
        }
        slot.preference = combined;
    }

    /// Combines a `Content-Usage` response header's statements in.
    pub fn add_header(&mut self, header: &str) {
        self.add_header_read(header);
    }

    /// [`UsagePreferences::add_header`], saying whether the header parsed as a Dictionary
    /// (`false`: only what [`parse_preferences`] reads of a broken field was combined in).
    pub fn add_header_read(&mut self, header: &str) -> bool {
        let (read, parsed) = read_preferences(header);
        for (category, pref) in read {
            let slot = &mut self.stated[category.index()];
            let combined = slot.preference.combine(pref);
            if combined != slot.preference || pref == combined {
                slot.from_header = true;
            }
            slot.preference = combined;
        }
        parsed
    }

    /// The known preferences as a structured-field dictionary (`train-ai=n, search=y`), for a
    /// `Content-Usage` header; `None` when nothing is known.
    pub fn to_header(&self) -> Option<String> {
        let parts: Vec<String> = Category::ALL
            .iter()
            .filter_map(|&c| match self.get(c).preference {
                Preference::Unknown => None,
                p => Some(format!("{}={}", c.label(), p.as_str())),
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The effective robots.txt preferences for `path` among `rules` (the usage rules of the groups
/// that apply): the rules with the longest matching path, combined.
pub(crate) fn decide<'a>(
    rules: impl Iterator<Item = &'a UsageRule> + Clone,
    path: &[u8],
) -> UsagePreferences {
    decide_as(rules, path, PatternReading::AsWritten)
}

/// [`decide`] for one reading of the path: the patterns read as `reading` says.
pub(crate) fn decide_as<'a>(
    rules: impl Iterator<Item = &'a UsageRule> + Clone,
    path: &[u8],
    reading: PatternReading,
) -> UsagePreferences {
    let longest = rules.clone().filter_map(|r| r.applies_as(path, reading)).max();
    let mut out = UsagePreferences::default();
    let Some(longest) = longest else { return out };
    for rule in rules.filter(|r| r.applies_as(path, reading) == Some(longest)) {
        for &(category, pref) in &rule.prefs {
            out.add_robots(category, pref, rule.line);
        }
    }
    out
}

/// The robots.txt preferences that hold on every path of the site, for a request whose path
/// cannot be seen (a CONNECT tunnel). A category is stated for every path only when the rules
/// without a path state it and every rule with a path (which wins on the paths it matches)
/// states the same value; otherwise it is unknown.
pub(crate) fn everywhere<'a>(
    rules: impl Iterator<Item = &'a UsageRule> + Clone,
) -> UsagePreferences {
    let mut out = decide(rules.clone().filter(|r| r.path().is_empty()), b"");
    for category in Category::ALL {
        let base = out.get(category).preference;
        if base == Preference::Unknown {
            continue;
        }
        let differs = rules
            .clone()
            .filter(|r| !r.path().is_empty())
            .any(|r| r.prefs.iter().find(|(c, _)| *c == category).map(|(_, p)| *p) != Some(base));
        if differs {
            out.forget(category);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_usage_is_read_as_the_vocabulary_draft_says() {
        use Preference::{Allow, Disallow};
        assert_eq!(
            parse_preferences("train-ai=n, search=y"),
            vec![(Category::TrainAi, Disallow), (Category::Search, Allow)]
        );
        // Parameters are ignored; the last value of a key counts.
        assert_eq!(
            parse_preferences("train-ai=y;x=1, train-ai=n"),
            [(Category::TrainAi, Disallow)]
        );
        // Unknown, never allow: a later value that is not the token y or n, the draft's own
        // example, `yes`, a Content Signals label, a string.
        for unknown in [
            "train-ai=y, train-ai=\"n\"",
            "train-ai=y, train-ai",
            "train-ai=y, train-ai, search=n, search=\"n\"",
            "train-ai=yes",
            "ai-train=no",
            "train-ai=\"n\"",
            "train-ai=(n)",
            "",
        ] {
            assert!(parse_preferences(unknown).is_empty(), "{unknown}");
        }
        // A dictionary that does not parse states no allow...
        for broken in ["TRAIN-AI=Y", "train-ai=y, %%%", ",,,", "TRAIN-AI=N"] {
            assert!(parse_preferences(broken).is_empty(), "{broken}");
        }
        // ... but a member that reads on its own as `label=n` still refuses (issue 42, M3: the
        // most restrictive reading of what can be read).
        for broken in ["train-ai=n, =y", "train-ai=n,", "train-ai=n;note=\"caf\u{e9}\""] {
            assert_eq!(parse_preferences(broken), [(Category::TrainAi, Disallow)], "{broken}");
        }
        // Known labels beside unknown ones are still read.
        assert_eq!(
            parse_preferences("train-genai=n, search=n, ai-use=y"),
            vec![(Category::Search, Disallow), (Category::AiUse, Allow)]
        );
    }

    #[test]
    fn content_signals_are_read_leniently() {
        assert_eq!(
            parse_signals("search=yes, ai-input=yes, ai-train=no"),
            vec![
                (Category::Search, Preference::Allow),
                (Category::AiUse, Preference::Allow),
                (Category::TrainAi, Preference::Disallow)
            ]
        );
        // Bad members are skipped; parameters ignored; the last member for a key wins.
        assert_eq!(
            parse_signals("bogus, train-ai=maybe, =n, ai-use=n;x=1, ai-use=y, foo=n"),
            vec![(Category::AiUse, Preference::Allow)]
        );
        // A value that is not a token (a string) makes the member unknown, as the vocabulary
        // draft says; so do labels the proxy does not know.
        assert!(parse_signals("train-ai=\"n\"").is_empty());
        assert_eq!(
            parse_signals("train-ai=\"n\", search=n, train-genai=n, ai-use=y"),
            vec![(Category::Search, Preference::Disallow), (Category::AiUse, Preference::Allow)]
        );
        assert!(parse_signals("").is_empty());
        assert!(parse_signals(",,,").is_empty());
    }

    #[test]
    fn rules_with_paths() {
        let r = UsageRule::content_usage(b"/ai-ok/ train-ai=y", 3).unwrap();
        assert_eq!(r.path(), "/ai-ok/");
        assert!(r.applies_as(b"/ai-ok/x", PatternReading::AsWritten).is_some());
        assert!(r.applies_as(b"/other", PatternReading::AsWritten).is_none());
        let all = UsageRule::content_usage(b"train-ai=n", 2).unwrap();
        assert_eq!(all.path(), "");
        assert!(all.applies_as(b"/anything", PatternReading::AsWritten).is_some());
        // Read decoded and folded, as allow/disallow patterns are (review-core N4).
        let r = UsageRule::content_usage(b"/wiki/Special%3A train-ai=n", 3).unwrap();
        assert!(r.applies_as(b"/wiki/Special:X", PatternReading::AsWritten).is_none());
        assert!(r.applies_as(b"/wiki/Special:X", PatternReading::Decoded).is_some());
        assert!(r.applies_as(b"/wiki/special:x", PatternReading::Folded).is_some());
        assert!(UsageRule::content_usage(b"/only-a-path", 4).is_none());
    }

    #[test]
    fn longest_path_wins_and_equal_paths_combine() {
        let rules = [
            UsageRule::content_usage(b"train-ai=n", 2).unwrap(),
            UsageRule::content_usage(b"/ai-ok/ train-ai=y", 3).unwrap(),
            UsageRule::content_usage(b"/mixed/ train-ai=y, search=y", 4).unwrap(),
            UsageRule::content_signal(b"/mixed/ ai-train=no", 5).unwrap(),
        ];
        let at = |p: &str| decide(rules.iter(), p.as_bytes());
        assert_eq!(at("/").get(Category::TrainAi).preference, Preference::Disallow);
        assert_eq!(at("/").get(Category::TrainAi).line, Some(2));
        assert_eq!(at("/ai-ok/x").get(Category::TrainAi).preference, Preference::Allow);
        assert_eq!(at("/ai-ok/x").get(Category::TrainAi).line, Some(3));
        let mixed = at("/mixed/a");
        assert_eq!(mixed.get(Category::TrainAi).preference, Preference::Disallow);
        assert_eq!(mixed.get(Category::TrainAi).line, Some(5));
        assert_eq!(mixed.get(Category::Search).preference, Preference::Allow);
        assert_eq!(mixed.get(Category::AiUse).preference, Preference::Unknown);
        assert_eq!(mixed.to_header().as_deref(), Some("train-ai=n, search=y"));
    }

    #[test]
    fn everywhere_needs_every_path_rule_to_agree() {
        let site_wide = UsageRule::content_usage(b"train-ai=n, search=y", 2).unwrap();
        let same = UsageRule::content_usage(b"/a/ train-ai=n", 3).unwrap();
        let other = UsageRule::content_usage(b"/blog/ search=y", 4).unwrap();
        let signal = UsageRule::content_signal(b"ai-train=no", 5).unwrap();
        let all = everywhere([site_wide.clone()].iter());
        assert_eq!(all.get(Category::TrainAi).preference, Preference::Disallow);
        assert_eq!(all.get(Category::TrainAi).line, Some(2));
        assert_eq!(all.get(Category::Search).preference, Preference::Allow);
        let agreeing = everywhere([site_wide.clone(), same].iter());
        assert_eq!(agreeing.get(Category::TrainAi).preference, Preference::Disallow);
        // `/blog/` says nothing of train-ai, and wins on its paths: train-ai is unknown there.
        let split = everywhere([site_wide, other.clone()].iter());
        assert_eq!(split.get(Category::TrainAi).preference, Preference::Unknown);
        assert_eq!(split.get(Category::Search).preference, Preference::Allow);
        assert_eq!(
            everywhere([signal].iter()).get(Category::TrainAi).preference,
            Preference::Disallow
        );
        assert!(everywhere([other].iter()).is_unknown());
    }

    #[test]
    fn header_combines_most_restrictive() {
        let mut p = UsagePreferences::default();
        p.add_robots(Category::TrainAi, Preference::Allow, 7);
        p.add_header("train-ai=n, ai-use=y");
        assert_eq!(p.get(Category::TrainAi).preference, Preference::Disallow);
        assert!(p.get(Category::TrainAi).from_header);
        assert_eq!(p.get(Category::AiUse).preference, Preference::Allow);
        assert_eq!(p.get(Category::Search).preference, Preference::Unknown);
    }

    /// Two readings' preferences combine per category, the most restrictive winning, with
    /// the line that decided it and what else contributed.
    #[test]
    fn readings_combine_per_category_most_restrictive() {
        let mut sent = UsagePreferences::default();
        sent.add_robots(Category::TrainAi, Preference::Allow, 3);
        sent.add_robots(Category::Search, Preference::Allow, 4);
        let mut decoded = UsagePreferences::default();
        decoded.add_robots(Category::TrainAi, Preference::Disallow, 9);
        decoded.add_header("ai-use=y");
        sent.combine(&decoded);
        let train = sent.get(Category::TrainAi);
        assert_eq!((train.preference, train.line), (Preference::Disallow, Some(9)));
        let search = sent.get(Category::Search);
        assert_eq!((search.preference, search.line), (Preference::Allow, Some(4)));
        let ai_use = sent.get(Category::AiUse);
        assert_eq!(ai_use.preference, Preference::Allow);
        assert!(ai_use.from_header);
    }

    /// A category is written as its IETF label.
    #[test]
    fn a_category_displays_as_its_label() {
        for (category, label) in [
            (Category::TrainAi, "train-ai"),
            (Category::AiUse, "ai-use"),
            (Category::Search, "search"),
        ] {
            assert_eq!(category.to_string(), label);
        }
    }

    /// A header that says what robots.txt said already is named as a source too; one that is
    /// less restrictive than robots.txt is not (it changed nothing and agreed with nothing).
    #[test]
    fn a_header_agreeing_with_robots_txt_is_named_and_a_looser_one_is_not() {
        let mut p = UsagePreferences::default();
        p.add_robots(Category::TrainAi, Preference::Disallow, 2);
        p.add_robots(Category::Search, Preference::Disallow, 3);
        assert!(p.add_header_read("train-ai=n, search=y"));
        let (train, search) = (p.get(Category::TrainAi), p.get(Category::Search));
        assert_eq!((train.preference, train.from_header), (Preference::Disallow, true));
        assert_eq!((search.preference, search.from_header), (Preference::Disallow, false));
        assert!(!p.add_header_read("train-ai=n,,"), "a broken Dictionary read as parsed");
    }

    /// Another opt-out's statement combines in, most restrictive winning, and is named: the
    /// first that contributed stays named.
    #[test]
    fn other_opt_outs_combine_in_and_are_named() {
        let mut p = UsagePreferences::default();
        p.add_signal(Category::TrainAi, Preference::Disallow, "X-Robots-Tag");
        p.add_signal(Category::TrainAi, Preference::Disallow, "tdmrep.json");
        p.add_signal(Category::Search, Preference::Allow, "meta");
        let train = p.get(Category::TrainAi);
        assert_eq!((train.preference, train.other), (Preference::Disallow, Some("X-Robots-Tag")));
        let search = p.get(Category::Search);
        assert_eq!((search.preference, search.other), (Preference::Allow, Some("meta")));
        let mut allowed = UsagePreferences::default();
        allowed.add_robots(Category::TrainAi, Preference::Disallow, 4);
        allowed.add_signal(Category::TrainAi, Preference::Allow, "meta");
        let train = allowed.get(Category::TrainAi);
        assert_eq!((train.preference, train.other), (Preference::Disallow, None));
        // One that says what robots.txt said is named.
        let mut agreed = UsagePreferences::default();
        agreed.add_robots(Category::TrainAi, Preference::Disallow, 4);
        agreed.add_signal(Category::TrainAi, Preference::Disallow, "noai");
        assert_eq!(agreed.get(Category::TrainAi).other, Some("noai"));
    }

    /// A usage rule keeps its line.
    #[test]
    fn a_usage_rule_keeps_its_line() {
        assert_eq!(UsageRule::content_usage(b"train-ai=n", 7).unwrap().line(), 7);
    }
}
