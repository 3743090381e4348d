//! [`Limits`]: what one decoder may produce.

/// Bounds on what one [`Decoder`](crate::Decoder) produces from untrusted bytes. Every length field is checked
/// against them and against the input that remains before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lists, maps and objects nested in one another, a back reference's copy included
    /// (default 64). The decoder recurses once per level.
    pub max_depth: usize,
    /// Elements of one list, entries of one map, UTF-16 units of one string, bytes of one
    /// binary (default 16 Mi).
    pub max_len: usize,
    /// Values produced by the stream, every element of a copied back reference included
    /// (default 4 Mi).
    pub max_nodes: usize,
    /// Class definitions, and type names of lists and maps, in the stream (default 4096).
    pub max_classes: usize,
    /// Lists, maps and objects in the stream: the values a back reference can name
    /// (default 1 Mi).
    pub max_refs: usize,
    /// Bytes of text and binary in the produced values, counting every copy: an object's class
    /// and field names once per instance, a typed list's or map's type name once per list or
    /// map, the data inside each copied back reference (default 256 MiB).
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_len: 16 << 20,
            max_nodes: 4 << 20,
            max_classes: 4096,
            max_refs: 1 << 20,
            max_bytes: 256 << 20,
        }
    }
}

/// Values a back reference may add per input byte, beyond the input's own (see
/// [`Limits::for_input`]).
pub const NODES_PER_BYTE: usize = 8;
/// Bytes of text a back reference or repeated class and field names may add per input byte
/// (an instance of a class with one field can be 2 bytes, its names 100).
pub const TEXT_PER_BYTE: usize = 64;

impl Limits {
    /// The default limits, with what one stream may produce budgeted in proportion to its
    /// `len` bytes: at most [`NODES_PER_BYTE`] values and [`TEXT_PER_BYTE`] bytes of text per
    /// input byte, plus 64 Ki values and 1 MiB of text, and never more than the defaults.
    ///
    /// Without back references every value takes at least one input byte, and text is about
    /// its own size (class and field names repeated per instance aside), so what Java sends
    /// fits; what does not is amplification: a few kilobytes of references to a shared list,
    /// which [`Limits::default`] alone would let grow to 4 Mi values (hundreds of megabytes).
    /// [`Decoder::new`](crate::Decoder::new) and [`from_bytes`](crate::from_bytes) use these.
    pub fn for_input(len: usize) -> Limits {
        let d = Limits::default();
        Limits {
            max_nodes: d
                .max_nodes
                .min(len.saturating_mul(NODES_PER_BYTE).saturating_add(64 << 10)),
            max_bytes: d
                .max_bytes
                .min(len.saturating_mul(TEXT_PER_BYTE).saturating_add(1 << 20)),
            ..d
        }
    }
}
