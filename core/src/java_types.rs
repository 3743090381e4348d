//! Java type names as a caller writes them in a signature, made full: the one table of short
//! names (`String`, `List`, `BigDecimal`) both transports (dubbo:// descriptors, Triple's
//! `argTypes`) read through [`full_name`].
//!
//! A provider finds the method by its full signature (`add(int,int)`,
//! `sayHello(java.lang.String)`), so a short name cannot be sent as it is. The short names
//! accepted, each standing for one class:
//!
//! | package | short names |
//! | --- | --- |
//! | `java.lang` | `Object`, `String`, `CharSequence`, `Boolean`, `Byte`, `Character`, `Short`, `Integer`, `Long`, `Float`, `Double`, `Number`, `Void`, `Class`, `Enum`, `Iterable`, `Comparable`, `Throwable`, `Exception`, `RuntimeException`, `StringBuilder`, `StringBuffer` |
//! | `java.util` | `Collection`, `List`, `ArrayList`, `LinkedList`, `Set`, `HashSet`, `LinkedHashSet`, `TreeSet`, `SortedSet`, `Map`, `HashMap`, `LinkedHashMap`, `TreeMap`, `SortedMap`, `Queue`, `Deque`, `ArrayDeque`, `Vector`, `Stack`, `Hashtable`, `Properties`, `Iterator`, `Optional`, `Date`, `Calendar`, `UUID`, `Locale`, `Currency`, `BitSet` |
//! | `java.math` | `BigDecimal`, `BigInteger` |
//! | `java.time` | `Instant`, `Duration`, `Period`, `LocalDate`, `LocalTime`, `LocalDateTime`, `ZonedDateTime`, `OffsetDateTime`, `ZoneId` |
//!
//! Primitives (`int`, `long`, ...), names with a package and JVM names (`[I`,
//! `[Ljava.lang.String;`) stay as they are; `[]` suffixes and generic arguments are kept, and
//! short names inside generic arguments are expanded too (an unknown one there, such as a type
//! variable `T`, is left: generic arguments are erased at run time). Any other name without a
//! package (`User`) is an error: the consumer cannot guess the package.

use std::borrow::Cow;

use crate::{Error, Result};

/// Java's primitive type names (and `void`), which have no package.
const PRIMITIVES: [&str; 9] = [
    "boolean", "byte", "char", "short", "int", "long", "float", "double", "void",
];

/// The short names accepted and their packages (see the module's table).
const SHORT: &[(&str, &str)] = &[
    ("Object", "java.lang"),
    ("String", "java.lang"),
    ("CharSequence", "java.lang"),
    ("Boolean", "java.lang"),
    ("Byte", "java.lang"),
    ("Character", "java.lang"),
    ("Short", "java.lang"),
    ("Integer", "java.lang"),
    ("Long", "java.lang"),
    ("Float", "java.lang"),
    ("Double", "java.lang"),
    ("Number", "java.lang"),
    ("Void", "java.lang"),
    ("Class", "java.lang"),
    ("Enum", "java.lang"),
    ("Iterable", "java.lang"),
    ("Comparable", "java.lang"),
    ("Throwable", "java.lang"),
    ("Exception", "java.lang"),
    ("RuntimeException", "java.lang"),
    ("StringBuilder", "java.lang"),
    ("StringBuffer", "java.lang"),
    ("Collection", "java.util"),
    ("List", "java.util"),
    ("ArrayList", "java.util"),
    ("LinkedList", "java.util"),
    ("Set", "java.util"),
    ("HashSet", "java.util"),
    ("LinkedHashSet", "java.util"),
    ("TreeSet", "java.util"),
    ("SortedSet", "java.util"),
    ("Map", "java.util"),
    ("HashMap", "java.util"),
    ("LinkedHashMap", "java.util"),
    ("TreeMap", "java.util"),
    ("SortedMap", "java.util"),
    ("Queue", "java.util"),
    ("Deque", "java.util"),
    ("ArrayDeque", "java.util"),
    ("Vector", "java.util"),
    ("Stack", "java.util"),
    ("Hashtable", "java.util"),
    ("Properties", "java.util"),
    ("Iterator", "java.util"),
    ("Optional", "java.util"),
    ("Date", "java.util"),
    ("Calendar", "java.util"),
    ("UUID", "java.util"),
    ("Locale", "java.util"),
    ("Currency", "java.util"),
    ("BitSet", "java.util"),
    ("BigDecimal", "java.math"),
    ("BigInteger", "java.math"),
    ("Instant", "java.time"),
    ("Duration", "java.time"),
    ("Period", "java.time"),
    ("LocalDate", "java.time"),
    ("LocalTime", "java.time"),
    ("LocalDateTime", "java.time"),
    ("ZonedDateTime", "java.time"),
    ("OffsetDateTime", "java.time"),
    ("ZoneId", "java.time"),
];

/// The package of the short name `simple` (`String` → `java.lang`), if it is one of the table.
pub fn package_of(simple: &str) -> Option<&'static str> {
    SHORT.iter().find(|(s, _)| *s == simple).map(|(_, p)| *p)
}

/// `java_type` with its short names made full: `String` → `java.lang.String`, `List<Long>[]`
/// → `java.util.List<java.lang.Long>[]`; primitives, full names and JVM names are returned as
/// they are (borrowed). A short name not in the table as the type itself (not inside generic
/// arguments) is a [`BadConfig`](crate::ErrorKind::BadConfig) error naming the rule.
pub fn full_name(java_type: &str) -> Result<Cow<'_, str>> {
    let t = java_type.trim();
    if t.starts_with('[') {
        return Ok(Cow::Borrowed(t));
    }
    let mut out: Option<String> = None;
    let mut depth = 0usize;
    let mut i = 0;
    let bytes = t.as_bytes();
    while i < bytes.len() {
        let b = bytes[i];
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
        if !ident(b) {
            match b {
                b'<' => depth += 1,
                b'>' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if let Some(o) = out.as_mut() {
                o.push(b as char);
            }
            i += 1;
            continue;
        }
        // One name, dots included (`java.util.List`, `String`, `extends`).
        let start = i;
        while i < bytes.len() && (ident(bytes[i]) || bytes[i] == b'.') {
            i += 1;
        }
        let name = &t[start..i];
        let full = if name.contains('.')
            || PRIMITIVES.contains(&name)
            || (depth > 0 && (name == "extends" || name == "super"))
        {
            None
        } else if let Some(package) = package_of(name) {
            Some(package)
        } else if depth == 0 {
            return Err(Error::bad_config(format!(
                "parameter type `{name}` is not a full Java class name: write it with its \
                 package, e.g. org.example.{name} (short names are accepted only for the \
                 common java.lang, java.util, java.math and java.time types, such as String, \
                 List, BigDecimal)"
            )));
        } else {
            // A type variable or an unknown class inside generic arguments: erased at run
            // time, left as it is.
            None
        };
        match (full, out.as_mut()) {
            (Some(package), Some(o)) => {
                o.push_str(package);
                o.push('.');
                o.push_str(name);
            }
            (Some(package), None) => {
                let mut o = String::with_capacity(t.len() + 16);
                o.push_str(&t[..start]);
                o.push_str(package);
                o.push('.');
                o.push_str(name);
                out = Some(o);
            }
            (None, Some(o)) => o.push_str(name),
            (None, None) => {}
        }
    }
    Ok(match out {
        Some(o) => Cow::Owned(o),
        None => Cow::Borrowed(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn short_names_expand_and_others_stay() {
        let f = |t| full_name(t).unwrap().into_owned();
        assert_eq!(f("String"), "java.lang.String");
        assert_eq!(f(" Integer "), "java.lang.Integer");
        assert_eq!(f("List"), "java.util.List");
        assert_eq!(f("Date"), "java.util.Date");
        assert_eq!(f("BigDecimal"), "java.math.BigDecimal");
        assert_eq!(f("LocalDate"), "java.time.LocalDate");
        assert_eq!(f("String[]"), "java.lang.String[]");
        assert_eq!(f("Object[][]"), "java.lang.Object[][]");
        assert_eq!(
            f("Map<String, List<Long>>"),
            "java.util.Map<java.lang.String, java.util.List<java.lang.Long>>"
        );
        assert_eq!(
            f("List<? extends Number>"),
            "java.util.List<? extends java.lang.Number>"
        );
        // Type variables and unknown names inside generic arguments are left.
        assert_eq!(f("List<T>"), "java.util.List<T>");
        assert_eq!(f("java.util.List<User>"), "java.util.List<User>");
        for same in [
            "int",
            "long[]",
            "boolean[][]",
            "java.lang.String",
            "com.foo.User[]",
            "[I",
            "[Ljava.lang.String;",
            "java.util.Map<java.lang.String, java.lang.Long>",
        ] {
            assert!(
                matches!(full_name(same).unwrap(), Cow::Borrowed(b) if b == same),
                "{same}"
            );
        }
    }

    #[test]
    fn an_unknown_short_name_is_refused_with_the_rule() {
        for (bad, name) in [("User", "User"), ("User[]", "User"), ("Foo<String>", "Foo")] {
            let e = full_name(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig);
            assert!(
                e.message().starts_with(&format!(
                    "parameter type `{name}` is not a full Java class name: write it with its package, e.g. org.example.{name}"
                )),
                "{}",
                e.message()
            );
        }
        assert_eq!(package_of("String"), Some("java.lang"));
        assert_eq!(package_of("User"), None);
    }
}
