//! The decoded form of one Hessian value.

/// One Hessian 2.0 value, as Java's hessian-lite writes and reads it.
///
/// Containers (lists, maps and objects) are the values a Hessian stream can refer back to; the
/// `n` of [`Value::Ref`] counts them in the order their encoding starts, from 0, across the whole
/// stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `boolean` / `java.lang.Boolean`.
    Bool(bool),
    /// `int`, and what Java writes as one: `short`, `byte`, their boxes.
    Int(i32),
    /// `long` / `java.lang.Long`.
    Long(i64),
    /// `double`, and what Java writes as one: `float`, `java.lang.Float`.
    Double(f64),
    /// `java.lang.String`, and what Java writes as one: `char`, `char[]`, `StringBuilder`.
    String(String),
    /// `byte[]`.
    Binary(Vec<u8>),
    /// java.util.Date: milliseconds since the Unix epoch.
    Date(i64),
    /// A list: a `java.util.Collection` or an array.
    List(List),
    /// A map: a `java.util.Map`, or an object written in the map form.
    Map(Map),
    /// An object: a class definition's name and its fields' values.
    Object(Object),
    /// Back reference to the n-th list/map/object of the stream that was still being decoded
    /// when referenced (a cycle, e.g. Throwable.cause == this). Encoded as a Hessian ref.
    Ref(usize),
}

/// A Hessian list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List {
    /// The list's type: `None` for an `ArrayList` (and every untyped list); a Java class name
    /// for other collections (`"java.util.LinkedList"`); Hessian's array names for arrays
    /// (`"[int"`, `"[string"`, `"[object"`, `"[com.foo.X"`).
    pub class: Option<String>,
    /// The elements, in order.
    pub items: Vec<Value>,
}

/// A Hessian map.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    /// The map's type: `None` for a `HashMap` (and every untyped map), else a Java class name
    /// (`"java.util.LinkedHashMap"`, `"java.util.TreeMap"`).
    pub class: Option<String>,
    /// The entries, in stream order.
    pub entries: Vec<(Value, Value)>,
}

/// A Hessian object: an instance of a class definition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    /// The Java class name.
    pub class: String,
    /// The fields in the class definition's order. hessian-lite writes a class's fields in
    /// reverse: the superclasses' first, each class's fields last-declared first.
    pub fields: Vec<(String, Value)>,
}

impl Value {
    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// An untyped list (Java's `ArrayList`).
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(List { class: None, items })
    }

    /// A typed list (a collection class name or a Hessian array name such as `"[int"`).
    pub fn typed_list(class: impl Into<String>, items: Vec<Value>) -> Value {
        Value::List(List {
            class: Some(class.into()),
            items,
        })
    }

    /// An untyped map (Java's `HashMap`).
    pub fn map(entries: Vec<(Value, Value)>) -> Value {
        Value::Map(Map {
            class: None,
            entries,
        })
    }

    /// A typed map (`"java.util.LinkedHashMap"`, ...).
    pub fn typed_map(class: impl Into<String>, entries: Vec<(Value, Value)>) -> Value {
        Value::Map(Map {
            class: Some(class.into()),
            entries,
        })
    }

    /// An object of `class` with `fields` in class-definition order.
    pub fn object<S: Into<String>>(class: impl Into<String>, fields: Vec<(S, Value)>) -> Value {
        Value::Object(Object {
            class: class.into(),
            fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        })
    }

    /// The string, if this is a [`Value::String`].
    pub fn str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is a [`Value::Int`] or a [`Value::Long`].
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(i64::from(*i)),
            Value::Long(l) => Some(*l),
            _ => None,
        }
    }

    /// The number, if this is a [`Value::Double`], [`Value::Int`] or [`Value::Long`].
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(d) => Some(*d),
            Value::Int(i) => Some(f64::from(*i)),
            Value::Long(l) => Some(*l as f64),
            _ => None,
        }
    }

    /// The elements, if this is a [`Value::List`].
    pub fn items(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(&l.items),
            _ => None,
        }
    }

    /// The Java class name of a typed list, map or object.
    pub fn class(&self) -> Option<&str> {
        match self {
            Value::List(l) => l.class.as_deref(),
            Value::Map(m) => m.class.as_deref(),
            Value::Object(o) => Some(&o.class),
            _ => None,
        }
    }

    /// The field `name` of an object, or the entry whose key is the string `name` of a map.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Object(o) => o.field(name),
            Value::Map(m) => m.get(name),
            _ => None,
        }
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl Object {
    /// The value of the field `name`.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

impl Map {
    /// The value of the first entry whose key is the string `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.str() == Some(key))
            .map(|(_, v)| v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Long(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Double(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::String(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Binary(v)
    }
}

impl From<List> for Value {
    fn from(v: List) -> Value {
        Value::List(v)
    }
}

impl From<Map> for Value {
    fn from(v: Map) -> Value {
        Value::Map(v)
    }
}

impl From<Object> for Value {
    fn from(v: Object) -> Value {
        Value::Object(v)
    }
}
