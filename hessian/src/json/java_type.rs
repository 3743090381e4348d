//! Java type names (`int`, `java.util.List<java.lang.Long>`, `[I`) as the mapping understands
//! them.

use super::error::MappingError;

/// A Java type as the mapping understands it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum JType {
    /// `java.lang.Object`, unknown `java.*` types, no type: the JSON decides.
    Any(Option<String>),
    Bool(bool),
    /// Integral types written as a Hessian int: name, primitive, range.
    Int(&'static str, bool, i64, i64),
    Long(bool),
    /// `double` / `float` (float: true), primitive.
    Double(bool, bool),
    Char(bool),
    Str,
    Date,
    BigDecimal,
    BigInteger,
    /// Classes hessian-lite writes with its StringValueSerializer (`java.util.UUID`).
    StringValue(String),
    Bytes,
    Chars,
    /// An array: element type, Hessian array type name.
    Array(Box<JType>, String),
    /// A collection (written like an `ArrayList`), its element type.
    Collection(String, Box<JType>),
    /// A map (written like a `HashMap`), key and value types.
    Map(String, Box<JType>, Box<JType>),
    /// A class outside `java.*` / `javax.*`: a bean, or an enum when given a string.
    Class(String),
}

impl JType {
    pub(super) fn parse(s: &str) -> Result<JType, MappingError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(MappingError::new("empty Java type name"));
        }
        if s.starts_with('[') {
            return Self::parse_descriptor(s);
        }
        if let Some(elem) = s.strip_suffix("[]").or_else(|| s.strip_suffix("...")) {
            return Ok(Self::array_of(Self::parse(elem)?));
        }
        let (base, args) = match s.find('<') {
            Some(i) if s.ends_with('>') => (s[..i].trim(), split_args(&s[i + 1..s.len() - 1])?),
            Some(_) => return Err(MappingError::new(format!("bad Java type name {s:?}"))),
            None => (s, Vec::new()),
        };
        let arg = |i: usize| -> Result<JType, MappingError> {
            match args.get(i) {
                Some(a) => Self::parse(a),
                None => Ok(JType::Any(None)),
            }
        };
        Ok(match base {
            "java.lang.Object" | "Object" => JType::Any(None),
            "boolean" => JType::Bool(true),
            "java.lang.Boolean" | "Boolean" => JType::Bool(false),
            "int" => JType::Int("int", true, i32::MIN.into(), i32::MAX.into()),
            "java.lang.Integer" | "Integer" => {
                JType::Int("java.lang.Integer", false, i32::MIN.into(), i32::MAX.into())
            }
            "short" => JType::Int("short", true, i16::MIN.into(), i16::MAX.into()),
            "java.lang.Short" | "Short" => {
                JType::Int("java.lang.Short", false, i16::MIN.into(), i16::MAX.into())
            }
            "byte" => JType::Int("byte", true, i8::MIN.into(), i8::MAX.into()),
            "java.lang.Byte" | "Byte" => {
                JType::Int("java.lang.Byte", false, i8::MIN.into(), i8::MAX.into())
            }
            "long" => JType::Long(true),
            "java.lang.Long" | "Long" => JType::Long(false),
            "double" => JType::Double(false, true),
            "java.lang.Double" | "Double" => JType::Double(false, false),
            "float" => JType::Double(true, true),
            "java.lang.Float" | "Float" => JType::Double(true, false),
            "char" => JType::Char(true),
            "java.lang.Character" | "Character" => JType::Char(false),
            "java.lang.String" | "String" | "java.lang.CharSequence" => JType::Str,
            "java.util.Date" => JType::Date,
            "java.math.BigDecimal" => JType::BigDecimal,
            "java.math.BigInteger" => JType::BigInteger,
            "java.util.UUID" => JType::StringValue(base.to_owned()),
            "java.lang.Iterable" | "java.util.Hashtable" | "java.util.Properties" => {
                if base == "java.lang.Iterable" {
                    JType::Collection(base.to_owned(), Box::new(arg(0)?))
                } else {
                    JType::Map(base.to_owned(), Box::new(arg(0)?), Box::new(arg(1)?))
                }
            }
            _ if is_java(base) => {
                let simple = base.rsplit('.').next().unwrap_or(base);
                let util = base.starts_with("java.util.");
                if util
                    && [
                        "List",
                        "Set",
                        "Collection",
                        "Queue",
                        "Deque",
                        "Vector",
                        "Stack",
                    ]
                    .iter()
                    .any(|k| simple.ends_with(k))
                {
                    JType::Collection(base.to_owned(), Box::new(arg(0)?))
                } else if util && simple.ends_with("Map") {
                    JType::Map(base.to_owned(), Box::new(arg(0)?), Box::new(arg(1)?))
                } else {
                    JType::Any(Some(base.to_owned()))
                }
            }
            _ => JType::Class(base.to_owned()),
        })
    }

    /// `[I`, `[Ljava.lang.String;`, `[[J`: the JVM's names of array classes.
    fn parse_descriptor(s: &str) -> Result<JType, MappingError> {
        let dims = s.bytes().take_while(|&b| b == b'[').count();
        let rest = &s[dims..];
        let elem = match rest {
            "Z" => "boolean",
            "B" => "byte",
            "C" => "char",
            "S" => "short",
            "I" => "int",
            "J" => "long",
            "F" => "float",
            "D" => "double",
            _ => match rest.strip_prefix('L').and_then(|r| r.strip_suffix(';')) {
                Some(name) if !name.is_empty() => name,
                _ => return Err(MappingError::new(format!("bad Java array type {s:?}"))),
            },
        };
        let mut t = Self::parse(elem)?;
        for _ in 0..dims {
            t = Self::array_of(t);
        }
        Ok(t)
    }

    fn array_of(elem: JType) -> JType {
        match elem {
            JType::Int("byte", true, ..) => JType::Bytes,
            JType::Char(true) => JType::Chars,
            e => {
                let name = format!("[{}", e.component_name());
                JType::Array(Box::new(e), name)
            }
        }
    }

    /// The name hessian-lite gives this type as an array component (`ArraySerializer`,
    /// `BasicSerializer`): `int`, `string`, `object`, `date`, `[int`, else the class name.
    fn component_name(&self) -> String {
        match self {
            JType::Any(None) => "object".into(),
            JType::Any(Some(n))
            | JType::StringValue(n)
            | JType::Collection(n, _)
            | JType::Map(n, ..)
            | JType::Class(n) => n.clone(),
            JType::Bool(true) => "boolean".into(),
            JType::Bool(false) => "java.lang.Boolean".into(),
            JType::Int(name, ..) => (*name).into(),
            JType::Long(true) => "long".into(),
            JType::Long(false) => "java.lang.Long".into(),
            JType::Double(false, true) => "double".into(),
            JType::Double(false, false) => "java.lang.Double".into(),
            JType::Double(true, true) => "float".into(),
            JType::Double(true, false) => "java.lang.Float".into(),
            JType::Char(true) => "char".into(),
            JType::Char(false) => "java.lang.Character".into(),
            JType::Str => "string".into(),
            JType::Date => "date".into(),
            JType::BigDecimal => "java.math.BigDecimal".into(),
            JType::BigInteger => "java.math.BigInteger".into(),
            JType::Bytes => "[byte".into(),
            JType::Chars => "[char".into(),
            JType::Array(_, name) => name.clone(),
        }
    }

    pub(super) fn name(&self) -> String {
        match self {
            JType::Any(None) => "java.lang.Object".into(),
            JType::Str => "java.lang.String".into(),
            JType::Date => "java.util.Date".into(),
            JType::Bytes => "byte[]".into(),
            JType::Chars => "char[]".into(),
            JType::Array(e, _) => format!("{}[]", e.name()),
            other => other.component_name(),
        }
    }

    pub(super) fn is_primitive(&self) -> bool {
        matches!(
            self,
            JType::Bool(true)
                | JType::Int(_, true, ..)
                | JType::Long(true)
                | JType::Double(_, true)
                | JType::Char(true)
        )
    }
}

fn is_java(name: &str) -> bool {
    name.starts_with("java.") || name.starts_with("javax.")
}

/// Splits generic arguments at top-level commas.
fn split_args(s: &str) -> Result<Vec<String>, MappingError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_owned());
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(MappingError::new(format!("bad generic arguments <{s}>")));
        }
        cur.push(c);
    }
    out.push(cur.trim().to_owned());
    // `?`, `? extends X`: the bound, or anything.
    Ok(out
        .into_iter()
        .map(|a| match a.strip_prefix("? extends ") {
            Some(b) => b.trim().to_owned(),
            None if a.starts_with('?') || a.len() == 1 => "java.lang.Object".to_owned(),
            None => a,
        })
        .collect())
}
