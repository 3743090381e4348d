//! JSON ↔ [`Value`](crate::Value), for generic invocations that take JSON arguments and give JSON results.

mod error;
mod exception;
mod java_type;
mod json_to_value;
mod value_to_json;

pub use error::MappingError;
pub use exception::{JavaException, java_exception};
pub use json_to_value::{from_json, generic_from_json};
pub use value_to_json::to_json;
