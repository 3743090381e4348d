use serde_json::Value;

/// One call: the method, its arguments as JSON values, and string attachments (Dubbo's
/// implicit parameters: `dubbo.tag`, per-call `timeout`/`retries` overrides, tracing ids...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Invocation {
    /// Method name.
    pub method: String,
    /// Arguments, in order.
    pub arguments: Vec<Value>,
    /// Attachments, in insertion order. Few in practice: a linear scan beats a map.
    pub attachments: Vec<(String, String)>,
    /// Java parameter types of the method (`java.lang.String`, `int`, `com.foo.User`, ...), for
    /// protocols that select the method by signature (dubbo://). Empty: not given; the dubbo://
    /// invoker then calls generically and the provider finds the method by name.
    pub parameter_types: Vec<String>,
    /// The arguments already in Hessian2 and the reader of the result, for a typed call
    /// (`switchman::Reference::call_as`): dubbo:// and Triple's Hessian wrapper send these
    /// bytes instead of converting [`Invocation::arguments`] (which then hold the same
    /// arguments as JSON, for routing rules, consistent hashing and the other protocols), and
    /// hand the reply's bytes to it instead of converting them to JSON.
    pub typed: Option<Typed>,
}

/// What a typed call gives the Hessian2 protocols ([`Invocation::typed`]), or Triple a
/// protobuf one ([`TypedBody::protobuf`]).
pub trait TypedBody: Send + Sync {
    /// Appends every argument, in order, as one Hessian2 stream (a dubbo:// body).
    fn write_args(&self, out: &mut Vec<u8>) -> crate::Result<()>;
    /// Every argument as a Hessian2 stream of its own (Triple's request wrapper).
    fn each_arg(&self) -> crate::Result<Vec<Vec<u8>>>;
    /// Reads the result from the start of `bytes` (a Hessian2 value; empty: a void answer)
    /// and keeps it; returns how many bytes it took and the JSON the call returns in its
    /// place (a token the caller exchanges for the typed result).
    fn read_result(&self, bytes: &[u8]) -> crate::Result<(usize, Value)>;
    /// A protobuf (IDL) call's request, already encoded, and the service its Triple path
    /// names; `None` (the default): a Hessian2 call. Triple sends such a call as
    /// `POST /{service}/{method}` with `application/grpc+proto` and the message as is, and
    /// hands the whole reply message to [`TypedBody::read_result`]. A protocol that cannot
    /// carry it (dubbo://) gets the error [`TypedBody::write_args`] returns for it.
    fn protobuf(&self) -> Option<Protobuf<'_>> {
        None
    }
    /// Where a server-streaming protobuf call's replies go; `None` (the default): the call
    /// has one reply. Triple then opens the stream (the attempt succeeds once the provider
    /// has answered with its headers, and fails over like any call before that), hands it
    /// to [`StreamSink::opened`] and answers the JSON that returns in place of a reply.
    fn server_stream(&self) -> Option<&dyn StreamSink> {
        None
    }
}

/// The replies of a server-streaming call, as the transport reads them
/// ([`TypedBody::server_stream`]).
pub trait MessageStream: Send + 'static {
    /// The next reply message (protobuf bytes, without gRPC's length prefix); `None` once
    /// the provider ended the stream with OK. An error ends the stream: a non-OK status
    /// (a Java exception), a broken connection, an invalid frame or the call's deadline.
    fn poll_message(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<crate::Result<bytes::Bytes>>>;
}

/// Takes the stream a server-streaming call opened ([`TypedBody::server_stream`]).
pub trait StreamSink: Send + Sync {
    /// The provider accepted the call: its replies come through `stream`. Returns the JSON
    /// the attempt answers with (a token the caller exchanges for the stream, as
    /// [`TypedBody::read_result`]'s).
    fn opened(&self, stream: Box<dyn MessageStream>) -> Value;
}

/// A protobuf (IDL) call's request ([`TypedBody::protobuf`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protobuf<'a> {
    /// The service in the request path: the proto's `package.Service`.
    pub service: &'a str,
    /// The request message, protobuf-encoded, without gRPC's length prefix.
    pub message: &'a [u8],
}

/// A shared [`TypedBody`]; equal when it is the same one.
#[derive(Clone)]
pub struct Typed(pub std::sync::Arc<dyn TypedBody>);

impl PartialEq for Typed {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for Typed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Typed(..)")
    }
}

/// The slot of a method name in a per-method table of `slots` entries (a power of two): a
/// multiplicative hash of its bytes taken eight at a time, its slot from the hash's top bits
/// (which depend on every byte). Cheap enough for the call path (one multiplication per eight
/// bytes, where a byte-at-a-time hash chains one per byte); the names are the caller's own, so
/// a table that uses it must treat a collision only as the way to a slower path.
#[inline]
pub fn method_slot(method: &str, slots: usize) -> usize {
    debug_assert!(slots.is_power_of_two());
    /// 2^64 divided by the golden ratio, odd: a multiplier that spreads every input bit into
    /// the product's top bits.
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes = method.as_bytes();
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    /// Eight bytes as one little-endian word. `#[inline]` of its own: a nested fn does not
    /// inherit its parent's, and other crates would call it out of line.
    #[inline]
    fn word(eight: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(eight);
        u64::from_le_bytes(w)
    }
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = (h ^ word(w)).wrapping_mul(K);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let last = if bytes.len() >= 8 {
            // The last eight bytes, overlapping the words already taken.
            word(&bytes[bytes.len() - 8..])
        } else {
            tail.iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
        };
        h = (h ^ last).wrapping_mul(K);
    }
    let bits = slots.trailing_zeros();
    if bits == 0 {
        0
    } else {
        (h >> (64 - bits)) as usize
    }
}

impl Invocation {
    /// A call of `method` with no arguments.
    pub fn new(method: impl Into<String>) -> Self {
        Invocation {
            method: method.into(),
            ..Default::default()
        }
    }

    /// Sets the arguments.
    pub fn with_args(mut self, args: Vec<Value>) -> Self {
        self.arguments = args;
        self
    }

    /// Sets the Java parameter types (one per argument), e.g. `["int", "int"]`.
    pub fn with_types<S: Into<String>>(mut self, types: impl IntoIterator<Item = S>) -> Self {
        self.parameter_types = types.into_iter().map(Into::into).collect();
        self
    }

    /// Makes it a typed call ([`Invocation::typed`]).
    pub fn with_typed(mut self, typed: std::sync::Arc<dyn TypedBody>) -> Self {
        self.typed = Some(Typed(typed));
        self
    }

    /// Adds (or replaces) an attachment.
    pub fn with_attachment(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_attachment(key, value);
        self
    }

    /// Adds (or replaces) an attachment.
    pub fn set_attachment(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.attachments.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.attachments.push((key, value));
        }
    }

    /// An attachment's value.
    pub fn attachment(&self, key: &str) -> Option<&str> {
        self.attachments
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::method_slot;
    use std::collections::HashSet;

    #[test]
    fn a_method_slot_is_within_the_table() {
        for name in [
            "",
            "a",
            "findUser",
            "sayHello2",
            "a.very.long.methodNameWithSuffix",
        ] {
            assert_eq!(method_slot(name, 1), 0);
            for slots in [2, 16, 32, 1024] {
                assert!(method_slot(name, slots) < slots, "{name} in {slots}");
            }
        }
    }

    #[test]
    fn every_byte_of_a_method_name_moves_its_slot() {
        // Names of every length up to 40, one byte changed at each position in turn: no
        // position (the middle of a long name included) is left out of the slot.
        for len in 1..=40usize {
            let base: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
            for pos in 0..len {
                let slots: HashSet<usize> = (b'A'..=b'P')
                    .map(|c| {
                        let mut name = base.clone();
                        name[pos] = c;
                        method_slot(std::str::from_utf8(&name).unwrap(), 32)
                    })
                    .collect();
                assert!(
                    slots.len() >= 4,
                    "length {len}, byte {pos}: 16 names in {} slots",
                    slots.len()
                );
            }
        }
    }

    #[test]
    fn similar_method_names_spread_over_the_slots() {
        let names: Vec<String> = (0..64)
            .flat_map(|i| [format!("getUser{i}"), format!("find{i}ByName")])
            .collect();
        let used: HashSet<usize> = names.iter().map(|n| method_slot(n, 32)).collect();
        assert!(used.len() >= 28, "128 names in {} of 32 slots", used.len());
    }
}
