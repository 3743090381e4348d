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

/// A Java type as the JVM sees it at run time: generic arguments erased (`List<Long>[]` →
/// `List[]`, `Map<String, List<Long>>` → `Map`). The one reading of type names that dubbo://
/// descriptors and Triple's `argTypes` share (through [`descriptor`] and [`class_name`]).
pub fn erase_generics(java_type: &str) -> Result<Cow<'_, str>> {
    let t = java_type.trim();
    match (t.find('<'), t.rfind('>')) {
        (Some(open), Some(close)) if close > open => Ok(Cow::Owned(format!(
            "{}{}",
            t[..open].trim_end(),
            &t[close + 1..]
        ))),
        (None, None) => Ok(Cow::Borrowed(t)),
        _ => Err(Error::bad_config(format!(
            "parameter type {java_type:?} has unbalanced generic brackets"
        ))),
    }
}

/// The JVM descriptor of a Java type as written in a method signature: `int` → `I`,
/// `java.lang.String` → `Ljava/lang/String;`, `int[]` → `[I`, `com.foo.User[][]` →
/// `[[Lcom/foo/User;`, `java.util.List<java.lang.Long>` → `Ljava/util/List;` (generic
/// arguments are erased, as in the JVM). JVM names (`[I`, `[Ljava.lang.String;`) are accepted
/// too, and the short names of this module (`String` →
/// `Ljava/lang/String;`); another name without a package (`User`) is an error.
pub fn descriptor(java_type: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::bad_config(format!(
            "parameter type {java_type:?} is not a Java type name: {why}"
        ))
    };
    let full = full_name(java_type)?;
    let erased = erase_generics(&full)?;
    let t: &str = &erased;
    if t.is_empty() {
        return Err(bad("it is empty"));
    }
    if let Some(rest) = t.strip_prefix('[') {
        // A JVM array name: `[I`, `[[J`, `[Ljava.lang.String;`.
        let depth = 1 + rest.chars().take_while(|&c| c == '[').count();
        let elem = &t[depth..];
        let inner = match elem {
            "Z" | "B" | "C" | "S" | "I" | "J" | "F" | "D" => elem.to_string(),
            _ => match elem.strip_prefix('L').and_then(|e| e.strip_suffix(';')) {
                Some(class) => class_descriptor(class).ok_or_else(|| bad("bad class name"))?,
                None => return Err(bad("bad array element")),
            },
        };
        return Ok(format!("{}{inner}", "[".repeat(depth)));
    }
    let mut base = t;
    let mut depth = 0;
    while let Some(b) = base.strip_suffix("[]") {
        base = b.trim_end();
        depth += 1;
    }
    let inner = match base {
        "boolean" => "Z".to_string(),
        "byte" => "B".to_string(),
        "char" => "C".to_string(),
        "short" => "S".to_string(),
        "int" => "I".to_string(),
        "long" => "J".to_string(),
        "float" => "F".to_string(),
        "double" => "D".to_string(),
        "void" => return Err(bad("void is not a parameter type")),
        class => class_descriptor(class).ok_or_else(|| {
            bad("expected a primitive, a class name such as java.lang.String, or an array T[]")
        })?,
    };
    Ok(format!("{}{inner}", "[".repeat(depth)))
}

fn class_descriptor(class: &str) -> Option<String> {
    let ok = !class.is_empty()
        && class.split('.').all(|seg| {
            let mut chars = seg.chars();
            matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        });
    ok.then(|| format!("L{};", class.replace('.', "/")))
}

/// The `Class.getName()` of a Java type written as in a method signature: `int` → `int`,
/// `java.util.List<java.lang.Long>` → `java.util.List`, `int[]` → `[I`, `com.foo.User[]` →
/// `[Lcom.foo.User;`. JVM array names (`[I`) are kept; the short names of
/// this module are made full (`String` → `java.lang.String`), another name
/// without a package (`User`) is an error.
pub fn class_name(java_type: &str) -> Result<String> {
    // Short names made full (`String` → `java.lang.String`; `User` is refused), then generic
    // arguments erased: they do not exist at run time (`List<Long>[]` is `List[]`).
    let full = full_name(java_type)?;
    let erased = erase_generics(&full)?;
    let d = descriptor(&erased)?;
    Ok(if d.starts_with('[') {
        d.replace('/', ".")
    } else {
        erased.trim().to_string()
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
