//! gRPC status codes and how they become Switchman errors.
//!
//! | status | Switchman error | retried |
//! |---|---|---|
//! | `UNAVAILABLE` (14) | transport | yes |
//! | `DEADLINE_EXCEEDED` (4) from the provider | timeout | no: the provider received the call and ran out of the deadline Switchman sent it |
//! | everything else (`UNIMPLEMENTED`, `INVALID_ARGUMENT`, `UNKNOWN`, application codes...) | business, message kept (`UNIMPLEMENTED`, and the `UNKNOWN` a Java 3.3 provider answers for a method it does not have, add that the provider does not serve the method) | no |
//!
//! Why, and how a Java Triple consumer differs (it treats every status as a result): the
//! README's "Differences from Dubbo".
//!
//! A response without `grpc-status` gets one derived from its HTTP status, as the gRPC spec
//! says (`404` → `UNIMPLEMENTED`, `429`/`502`/`503`/`504` → `UNAVAILABLE`, ...).

use std::fmt;

use switchman_core::Error;

/// A gRPC status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// 0: success.
    Ok,
    /// 1: the caller cancelled.
    Cancelled,
    /// 2: unknown error (what most servers send for an uncaught exception).
    Unknown,
    /// 3: the request is invalid.
    InvalidArgument,
    /// 4: the deadline expired.
    DeadlineExceeded,
    /// 5: not found.
    NotFound,
    /// 6: already exists.
    AlreadyExists,
    /// 7: permission denied.
    PermissionDenied,
    /// 8: a resource (quota, memory) is exhausted.
    ResourceExhausted,
    /// 9: the system is not in a state for this operation.
    FailedPrecondition,
    /// 10: aborted (a concurrency conflict).
    Aborted,
    /// 11: out of range.
    OutOfRange,
    /// 12: the service or method is not implemented.
    Unimplemented,
    /// 13: internal error.
    Internal,
    /// 14: the service is unavailable (transient).
    Unavailable,
    /// 15: data loss.
    DataLoss,
    /// 16: not authenticated.
    Unauthenticated,
    /// A code outside 0..=16.
    Other(u32),
}

impl Code {
    /// The code for its number.
    pub fn from_u32(n: u32) -> Code {
        match n {
            0 => Code::Ok,
            1 => Code::Cancelled,
            2 => Code::Unknown,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            6 => Code::AlreadyExists,
            7 => Code::PermissionDenied,
            8 => Code::ResourceExhausted,
            9 => Code::FailedPrecondition,
            10 => Code::Aborted,
            11 => Code::OutOfRange,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            15 => Code::DataLoss,
            16 => Code::Unauthenticated,
            n => Code::Other(n),
        }
    }

    /// The code's number.
    pub fn as_u32(self) -> u32 {
        match self {
            Code::Ok => 0,
            Code::Cancelled => 1,
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::DeadlineExceeded => 4,
            Code::NotFound => 5,
            Code::AlreadyExists => 6,
            Code::PermissionDenied => 7,
            Code::ResourceExhausted => 8,
            Code::FailedPrecondition => 9,
            Code::Aborted => 10,
            Code::OutOfRange => 11,
            Code::Unimplemented => 12,
            Code::Internal => 13,
            Code::Unavailable => 14,
            Code::DataLoss => 15,
            Code::Unauthenticated => 16,
            Code::Other(n) => n,
        }
    }

    /// The code's name as the gRPC spec writes it (`UNAVAILABLE`).
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
            Code::Other(_) => "NON_STANDARD",
        }
    }

    /// The status a response without `grpc-status` gets from its HTTP status (gRPC's
    /// "HTTP to gRPC status code mapping").
    pub fn from_http(status: u16) -> Code {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.as_u32())
    }
}

/// A gRPC status: a code and a message (the `grpc-status` and `grpc-message` pair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// The message (decoded; may be empty).
    pub message: String,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }

    /// Parses the `grpc-status` and `grpc-message` header values. `None` when `grpc-status` is
    /// not a number.
    pub fn from_header_values(status: &[u8], message: Option<&[u8]>) -> Option<Status> {
        let n: u32 = std::str::from_utf8(status).ok()?.trim().parse().ok()?;
        Some(Status {
            code: Code::from_u32(n),
            message: message.map(percent_decode).unwrap_or_default(),
        })
    }

    /// The Switchman error for a non-OK status from the provider at `address` answering
    /// `method` (see the module docs for the mapping).
    pub fn into_error(self, address: &str, method: &str) -> Error {
        let text = if self.message.is_empty() {
            format!("{address} answered {method} with {}", self.code)
        } else {
            format!(
                "{address} answered {method} with {}: {}",
                self.code, self.message
            )
        };
        // A method the provider does not have: `UNIMPLEMENTED` as gRPC says, or (Java Dubbo
        // 3.3's Triple provider of a plain interface) `UNKNOWN` with the NullPointerException
        // its method lookup throws.
        let unserved = self.code == Code::Unimplemented
            || (self.code == Code::Unknown
                && self.message.contains("\"methodDescriptors\" is null"));
        let text = if unserved {
            format!(
                "{text} (the provider does not serve {method}: it has no method of that name, \
                 or none with these parameter types)"
            )
        } else {
            text
        };
        match self.code {
            Code::Unavailable => Error::transport(text),
            Code::DeadlineExceeded => Error::timeout(text).with_retryable(false),
            _ => Error::business(text),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

/// Percent-encodes a `grpc-message` value: everything outside printable ASCII, and `%`.
pub fn percent_encode(message: &str) -> String {
    switchman_core::percent::encode_grpc_message(message)
}

/// Decodes a percent-encoded `grpc-message`; malformed escapes are kept as they are, and
/// invalid UTF-8 is replaced, as the spec asks ("never fail a call because of the message").
pub fn percent_decode(raw: &[u8]) -> String {
    switchman_core::percent::decode_lenient(raw, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::ErrorKind;

    #[test]
    fn codes_round_trip_and_name() {
        for n in 0..=17 {
            assert_eq!(Code::from_u32(n).as_u32(), n);
        }
        assert_eq!(Code::from_u32(14), Code::Unavailable);
        assert_eq!(Code::Unimplemented.to_string(), "UNIMPLEMENTED (12)");
    }

    #[test]
    fn unavailable_is_a_retryable_transport_error() {
        let e = Status::new(Code::Unavailable, "draining").into_error("10.0.0.1:50051", "sayHello");
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert!(e.is_retryable());
        assert_eq!(
            e.message(),
            "10.0.0.1:50051 answered sayHello with UNAVAILABLE (14): draining"
        );
    }

    #[test]
    fn deadline_from_the_provider_is_a_timeout_not_retried() {
        let e = Status::new(Code::DeadlineExceeded, "").into_error("a:1", "m");
        assert_eq!(e.kind(), ErrorKind::Timeout);
        assert!(!e.is_retryable());
        assert_eq!(e.message(), "a:1 answered m with DEADLINE_EXCEEDED (4)");
    }

    #[test]
    fn other_statuses_are_business_errors_keeping_the_message() {
        for code in [
            Code::Unimplemented,
            Code::InvalidArgument,
            Code::Unknown,
            Code::Internal,
            Code::NotFound,
            Code::Other(42),
        ] {
            let e = Status::new(code, "no such method: hi").into_error("a:1", "hi");
            assert_eq!(e.kind(), ErrorKind::Business, "{code}");
            assert!(!e.is_retryable(), "{code}");
            assert!(e.message().contains(": no such method: hi"), "{code}");
        }
        let java =
            "Cannot invoke \"java.util.List.iterator()\" because \"methodDescriptors\" is null";
        let e = Status::new(Code::Unknown, java).into_error("a:1", "addd");
        assert!(
            e.message().ends_with("(the provider does not serve addd: it has no method of that name, or none with these parameter types)"),
            "{}",
            e.message()
        );
        let e = Status::new(Code::Unimplemented, "nope").into_error("a:1", "addd");
        assert_eq!(
            e.message(),
            "a:1 answered addd with UNIMPLEMENTED (12): nope (the provider does not serve addd: \
             it has no method of that name, or none with these parameter types)"
        );
    }

    #[test]
    fn http_statuses_map_as_the_grpc_spec_says() {
        assert_eq!(Code::from_http(404), Code::Unimplemented);
        assert_eq!(Code::from_http(503), Code::Unavailable);
        assert_eq!(Code::from_http(429), Code::Unavailable);
        assert_eq!(Code::from_http(400), Code::Internal);
        assert_eq!(Code::from_http(415), Code::Unknown);
    }

    #[test]
    fn header_values_parse_and_messages_percent_decode() {
        let s =
            Status::from_header_values(b"12", Some(b"method%20not%20found%3A %E2%9C%93")).unwrap();
        assert_eq!(s, Status::new(Code::Unimplemented, "method not found: ✓"));
        assert_eq!(Status::from_header_values(b"x", None), None);
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"%zz%4"), "%zz%4");
        let msg = "50% off: ✓\n";
        assert_eq!(percent_encode(msg), "50%25 off: %E2%9C%93%0A");
        assert_eq!(percent_decode(percent_encode(msg).as_bytes()), msg);
    }
}
