//! The decoded tree before it becomes [`Value`]s: containers numbered as Hessian refs number
//! them, and class definitions.

use crate::value::Value;

/// Elements reserved ahead of decoding them; a longer list grows as its elements arrive.
pub(super) const PREALLOCATE: usize = 1024;

/// Where a decoded value sits until the top-level value is complete.
#[derive(Debug)]
pub(super) enum Slot {
    Leaf(Value),
    /// A container decoded here.
    Node(usize),
    /// A back reference to a complete container: a copy of it.
    Copy(usize),
    /// A back reference to a container still being decoded: [`Value::Ref`].
    Cycle(usize),
}

#[derive(Debug)]
pub(super) enum Body {
    /// Still being decoded.
    Open,
    List {
        class: Option<String>,
        items: Vec<Slot>,
    },
    Map {
        class: Option<String>,
        entries: Vec<(Slot, Slot)>,
    },
    Object {
        class: usize,
        fields: Vec<Slot>,
    },
}

/// One list, map or object of the stream, numbered as Hessian refs number them.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) body: Body,
    /// Values in its materialised form (itself included).
    pub(super) nodes: usize,
    /// Text and binary bytes in its materialised form.
    pub(super) bytes: usize,
    /// Nesting depth of its materialised form (1 for a container of scalars).
    pub(super) depth: usize,
}

#[derive(Debug)]
pub(super) struct ClassDef {
    pub(super) name: String,
    pub(super) fields: Vec<String>,
    pub(super) bytes: usize,
}
