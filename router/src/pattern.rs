//! Value patterns of condition rules: Dubbo's glob (only the last `*` counts), integer ranges
//! and `$name` references, and the match/mismatch pair a condition key holds.

/// Resolves a `$name` reference to the consumer's value (only given for *then* parts).
pub(crate) type Resolve<'a> = Option<&'a dyn Fn(&str) -> Option<String>>;

/// One value pattern as written after `=` or `!=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// `*`: any value, even an empty one.
    Any,
    /// No `*`: the value must be equal.
    Exact(Box<str>),
    /// `abc*`.
    Prefix(Box<str>),
    /// `*abc`.
    Suffix(Box<str>),
    /// `ab*cd`: starts with `ab` and ends with `cd` (the two may overlap, as in Dubbo).
    PrefixSuffix(Box<str>, Box<str>),
    /// `$name` whose consumer value is missing: matches only an empty value.
    MissingRef,
    /// `a~b`, `~b`, `a~` (inclusive). `None` bounds are open.
    Range(Option<i64>, Option<i64>),
    /// A range that does not parse (`~`, `a~b~c`, `x~y`): false in *when*, true in *then*.
    BadRange,
}

impl Pattern {
    /// Compiles a glob as Dubbo's `UrlUtils.isMatchGlobPattern` reads it.
    pub(crate) fn glob(p: &str) -> Pattern {
        if p == "*" {
            return Pattern::Any;
        }
        match p.rfind('*') {
            None => Pattern::Exact(p.into()),
            Some(i) if i == p.len() - 1 => Pattern::Prefix(p[..i].into()),
            Some(0) => Pattern::Suffix(p[1..].into()),
            Some(i) => Pattern::PrefixSuffix(p[..i].into(), p[i + 1..].into()),
        }
    }

    /// Compiles a value as written in a rule. `$name` references are resolved by `resolve`
    /// (only in *then* parts; in *when* parts `$name` is a literal, as in Dubbo).
    pub(crate) fn compile(raw: &str, resolve: Resolve<'_>) -> Pattern {
        if raw.contains('~') {
            return Self::range(raw);
        }
        if let (Some(resolve), Some(name)) = (resolve, raw.strip_prefix('$')) {
            return match resolve(name) {
                Some(v) if v.is_empty() => Pattern::MissingRef,
                Some(v) => Pattern::glob(&v),
                None => Pattern::MissingRef,
            };
        }
        Pattern::glob(raw)
    }

    fn range(raw: &str) -> Pattern {
        let (lo, hi) = raw.split_once('~').expect("caller checked for '~'");
        if hi.contains('~') || (lo.is_empty() && hi.is_empty()) {
            return Pattern::BadRange;
        }
        let bound = |s: &str| -> Result<Option<i64>, ()> {
            if s.is_empty() {
                Ok(None)
            } else {
                s.trim().parse::<i64>().map(Some).map_err(|_| ())
            }
        };
        match (bound(lo), bound(hi)) {
            (Ok(lo), Ok(hi)) => Pattern::Range(lo, hi),
            _ => Pattern::BadRange,
        }
    }

    /// Whether `value` matches. `in_when` selects the default of ranges that cannot be
    /// evaluated (a bad range, or a value that is not an integer): false in *when*, true in
    /// *then*.
    pub(crate) fn matches(&self, value: &str, in_when: bool) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::MissingRef => value.is_empty(),
            Pattern::Range(lo, hi) => match value.trim().parse::<i64>() {
                Ok(v) => lo.is_none_or(|lo| v >= lo) && hi.is_none_or(|hi| v <= hi),
                Err(_) => !in_when,
            },
            Pattern::BadRange => !in_when,
            _ if value.is_empty() => false,
            Pattern::Exact(e) => value == &**e,
            Pattern::Prefix(p) => value.starts_with(&**p),
            Pattern::Suffix(s) => value.ends_with(&**s),
            Pattern::PrefixSuffix(p, s) => value.starts_with(&**p) && value.ends_with(&**s),
        }
    }
}

/// The values one condition key is compared with: `key = a,b` fills `matches`,
/// `key != c` fills `mismatches`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MatchPair {
    pub(crate) matches: Vec<Pattern>,
    pub(crate) mismatches: Vec<Pattern>,
}

impl MatchPair {
    /// Dubbo's `AbstractConditionMatcher.isMatch`: a missing value never matches; a
    /// mismatch wins over a match; a key with neither never matches.
    pub(crate) fn is_match(&self, value: Option<&str>, in_when: bool) -> bool {
        let Some(value) = value else {
            return false;
        };
        if self.matches.is_empty() && self.mismatches.is_empty() {
            return false;
        }
        if self.mismatches.iter().any(|p| p.matches(value, in_when)) {
            return false;
        }
        if self.matches.is_empty() {
            return true;
        }
        self.matches.iter().any(|p| p.matches(value, in_when))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(p: &str, v: &str) -> bool {
        Pattern::glob(p).matches(v, true)
    }

    #[test]
    fn glob_only_last_star_counts() {
        assert!(g("*", ""));
        assert!(g("*", "x"));
        assert!(g("abc", "abc"));
        assert!(!g("abc", "abcd"));
        assert!(g("ab*", "abcd"));
        assert!(g("*cd", "abcd"));
        assert!(g("a*d", "abcd"));
        // Overlapping prefix and suffix, as in Dubbo.
        assert!(g("ab*ba", "aba"));
        // Only the last `*` is a wildcard: the first one is literal.
        assert!(g("a*b*", "a*bzz"));
        assert!(!g("a*b*", "axbzz"));
        assert!(!g("a*", ""));
    }

    #[test]
    fn ranges() {
        let r = |p: &str, v: &str, w: bool| Pattern::compile(p, None).matches(v, w);
        assert!(r("1~10", "1", true));
        assert!(r("1~10", "10", true));
        assert!(!r("1~10", "11", true));
        assert!(r("~10", "-5", true));
        assert!(!r("~10", "11", true));
        assert!(r("5~", "500", true));
        assert!(!r("5~", "4", true));
        // A range that does not parse: false in when, true in then.
        for bad in ["~", "a~b", "1~2~3", "x~"] {
            assert!(!r(bad, "1", true), "{bad}");
            assert!(r(bad, "1", false), "{bad}");
        }
        // A value that is not an integer cannot be compared: same defaults.
        assert!(!r("1~10", "abc", true));
        assert!(r("1~10", "abc", false));
    }

    #[test]
    fn references_resolve_only_when_asked() {
        let resolve = |name: &str| (name == "zone").then(|| "z1".to_string());
        let p = Pattern::compile("$zone", Some(&resolve));
        assert!(p.matches("z1", false));
        assert!(!p.matches("z2", false));
        let missing = Pattern::compile("$nope", Some(&resolve));
        assert!(missing.matches("", false));
        assert!(!missing.matches("x", false));
        assert!(Pattern::compile("$zone", None).matches("$zone", true));
    }

    #[test]
    fn match_pair_rules() {
        let pair = |m: &[&str], mm: &[&str]| MatchPair {
            matches: m.iter().map(|s| Pattern::glob(s)).collect(),
            mismatches: mm.iter().map(|s| Pattern::glob(s)).collect(),
        };
        assert!(pair(&["a", "b"], &[]).is_match(Some("b"), true));
        assert!(!pair(&["a"], &[]).is_match(Some("c"), true));
        assert!(pair(&[], &["a"]).is_match(Some("c"), true));
        assert!(!pair(&[], &["a"]).is_match(Some("a"), true));
        // A mismatch wins over a match.
        assert!(!pair(&["a*"], &["ab"]).is_match(Some("ab"), true));
        assert!(pair(&["a*"], &["ab"]).is_match(Some("ac"), true));
        // A missing value never matches, not even `!=`.
        assert!(!pair(&[], &["a"]).is_match(None, true));
        // A key without values never matches.
        assert!(!pair(&[], &[]).is_match(Some("a"), true));
    }
}
