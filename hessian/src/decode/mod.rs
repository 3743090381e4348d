//! The decoder: bounded, never panics on any input.

mod budget;
mod cursor;
mod error;
mod limits;
mod refs;
mod scalars;
mod stream;
mod tree;

pub use cursor::Decoder;
pub use error::DecodeError;
pub use limits::{Limits, NODES_PER_BYTE, TEXT_PER_BYTE};
