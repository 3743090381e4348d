//! Declared Java types (`double`, `java.util.List<java.lang.Long>`, `[I`) as the renderer
//! understands them. Parsing borrows from the type name: nothing is allocated.

/// The order a collection or map iterates its members in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// As the JSON holds them (`ArrayList`, `LinkedHashMap`, `LinkedHashSet`).
    Insertion,
    /// `HashMap`'s bucket order (`HashMap`, `HashSet`).
    Hash,
    /// Natural order (`TreeMap`, `TreeSet`).
    Sorted,
}

/// A declared Java type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum JType<'t> {
    /// No type, `java.lang.Object`, a type variable, an unknown `java.*` class: the JSON
    /// decides (what Hessian makes of it untyped).
    Any,
    /// `String`, `CharSequence`, `char`, `Character`.
    Str,
    Bool,
    /// `byte`, `short`, `int` and their boxes (Java objects `Byte`/`Short`/`Integer`), with
    /// their range.
    Int(i64, i64),
    Long,
    BigInteger,
    Double,
    Float,
    BigDecimal,
    /// A collection: its iteration order, whether it drops duplicates (a set), its element
    /// type (generic argument).
    Collection(Order, bool, Option<&'t str>),
    /// A map: its iteration order, key and value types.
    Map(Order, Option<&'t str>, Option<&'t str>),
    /// A Java array, its element type.
    Array(&'t str),
    /// Any other class: a POJO, an enum, `java.util.Date`, `java.util.UUID`.
    Class,
}

impl<'t> JType<'t> {
    /// The type `name` declares; `None` is [`JType::Any`].
    pub(super) fn of(name: Option<&'t str>) -> JType<'t> {
        name.map_or(JType::Any, JType::parse)
    }

    pub(super) fn parse(name: &'t str) -> JType<'t> {
        let s = name.trim();
        if s.is_empty() {
            return JType::Any;
        }
        if let Some(rest) = s.strip_prefix('[') {
            return JType::Array(match rest {
                "Z" => "boolean",
                "B" => "byte",
                "C" => "char",
                "S" => "short",
                "I" => "int",
                "J" => "long",
                "F" => "float",
                "D" => "double",
                r if r.starts_with('[') => r,
                r => r
                    .strip_prefix('L')
                    .and_then(|c| c.strip_suffix(';'))
                    .unwrap_or(r),
            });
        }
        if let Some(elem) = s.strip_suffix("[]").or_else(|| s.strip_suffix("...")) {
            return JType::Array(elem);
        }
        let (base, args) = match s.find('<') {
            Some(i) => (
                s[..i].trim(),
                s[i + 1..].strip_suffix('>').unwrap_or(&s[i + 1..]),
            ),
            None => (s, ""),
        };
        match base {
            "java.lang.Object"
            | "Object"
            | "java.io.Serializable"
            | "java.lang.Number"
            | "java.lang.Comparable" => JType::Any,
            "boolean" | "java.lang.Boolean" | "Boolean" => JType::Bool,
            "byte" | "java.lang.Byte" | "Byte" => JType::Int(i8::MIN.into(), i8::MAX.into()),
            "short" | "java.lang.Short" | "Short" => JType::Int(i16::MIN.into(), i16::MAX.into()),
            "int" | "java.lang.Integer" | "Integer" => JType::Int(i32::MIN.into(), i32::MAX.into()),
            "long" | "java.lang.Long" | "Long" => JType::Long,
            "double" | "java.lang.Double" | "Double" => JType::Double,
            "float" | "java.lang.Float" | "Float" => JType::Float,
            "char"
            | "java.lang.Character"
            | "Character"
            | "java.lang.String"
            | "String"
            | "java.lang.CharSequence" => JType::Str,
            "java.math.BigDecimal" => JType::BigDecimal,
            "java.math.BigInteger" => JType::BigInteger,
            "java.lang.Iterable" => JType::Collection(Order::Insertion, false, generic(args, 0)),
            "java.util.Hashtable" | "java.util.Properties" => {
                JType::Map(Order::Insertion, generic(args, 0), generic(args, 1))
            }
            _ if base.starts_with("java.util.") => util(base, args),
            _ if base.starts_with("java.") || base.starts_with("javax.") => JType::Any,
            // A name without a package: a type variable (`T`, `E`) or an unknown short name.
            _ if !base.contains('.') => JType::Any,
            _ => JType::Class,
        }
    }
}

/// `java.util.*` types: collections and maps by their simple name; `Date`, `UUID` and the like
/// are classes; anything else the JSON decides.
fn util<'t>(base: &'t str, args: &'t str) -> JType<'t> {
    let simple = base.rsplit('.').next().unwrap_or(base);
    let (a0, a1) = (generic(args, 0), generic(args, 1));
    if simple.ends_with("Map") {
        let order = match simple {
            "Map" | "HashMap" | "AbstractMap" => Order::Hash,
            "TreeMap"
            | "SortedMap"
            | "NavigableMap"
            | "ConcurrentSkipListMap"
            | "ConcurrentNavigableMap" => Order::Sorted,
            _ => Order::Insertion,
        };
        return JType::Map(order, a0, a1);
    }
    if simple.ends_with("Set") {
        let order = match simple {
            "Set" | "HashSet" | "AbstractSet" => Order::Hash,
            "TreeSet" | "SortedSet" | "NavigableSet" | "ConcurrentSkipListSet" => Order::Sorted,
            _ => Order::Insertion,
        };
        return JType::Collection(order, true, a0);
    }
    if ["List", "Collection", "Queue", "Deque", "Vector", "Stack"]
        .iter()
        .any(|k| simple.ends_with(k))
    {
        return JType::Collection(Order::Insertion, false, a0);
    }
    match simple {
        "Date" | "UUID" | "Locale" | "Currency" => JType::Class,
        _ => JType::Any,
    }
}

/// The `i`-th generic argument of `args` (the text between `<` and `>`), split at top-level
/// commas; `?`, `? super X` and type variables are `None` (anything), `? extends X` is `X`.
fn generic(args: &str, i: usize) -> Option<&str> {
    let mut depth = 0i32;
    let mut start = 0;
    let mut n = 0;
    let bytes = args.as_bytes();
    for (k, &b) in bytes
        .iter()
        .enumerate()
        .chain(std::iter::once((bytes.len(), &b',')))
    {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b',' if depth == 0 => {
                if n == i {
                    let a = args[start..k].trim();
                    if a.is_empty() || a.starts_with("? super") || a == "?" {
                        return None;
                    }
                    return Some(a.strip_prefix("? extends ").map_or(a, str::trim));
                }
                n += 1;
                start = k + 1;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        use JType::*;
        let int = Int(i32::MIN.into(), i32::MAX.into());
        let table: &[(&str, JType<'_>)] = &[
            ("", Any),
            ("java.lang.Object", Any),
            ("T", Any),
            ("java.util.Optional", Any),
            ("int", int),
            ("java.lang.Integer", int),
            ("byte", Int(-128, 127)),
            ("long", Long),
            ("double", Double),
            ("java.lang.Float", Float),
            ("char", Str),
            ("java.lang.String", Str),
            ("boolean", Bool),
            ("java.math.BigDecimal", BigDecimal),
            ("java.math.BigInteger", BigInteger),
            ("java.util.List", Collection(Order::Insertion, false, None)),
            (
                "java.util.List<java.lang.Double>",
                Collection(Order::Insertion, false, Some("java.lang.Double")),
            ),
            (
                "java.util.Collection<? extends java.lang.Long>",
                Collection(Order::Insertion, false, Some("java.lang.Long")),
            ),
            ("java.util.Set<?>", Collection(Order::Hash, true, None)),
            (
                "java.util.LinkedHashSet",
                Collection(Order::Insertion, true, None),
            ),
            (
                "java.util.TreeSet<E>",
                Collection(Order::Sorted, true, Some("E")),
            ),
            ("java.util.Map", Map(Order::Hash, None, None)),
            (
                "java.util.Map<java.lang.String, java.util.List<java.lang.Long>>",
                Map(
                    Order::Hash,
                    Some("java.lang.String"),
                    Some("java.util.List<java.lang.Long>"),
                ),
            ),
            ("java.util.LinkedHashMap", Map(Order::Insertion, None, None)),
            ("java.util.TreeMap", Map(Order::Sorted, None, None)),
            (
                "java.util.concurrent.ConcurrentHashMap",
                Map(Order::Insertion, None, None),
            ),
            ("java.util.Date", Class),
            ("com.foo.User", Class),
            ("java.lang.String[]", Array("java.lang.String")),
            ("int...", Array("int")),
            ("[I", Array("int")),
            ("[[J", Array("[J")),
            ("[Ljava.lang.String;", Array("java.lang.String")),
        ];
        for (name, want) in table {
            assert_eq!(JType::parse(name), *want, "{name}");
        }
        assert_eq!(JType::of(None), Any);
    }
}
