//! The hessian crate's integration tests, one module per concern, in one test binary (one link
//! step instead of one per file). `hostile` installs a global allocator that records, per
//! thread, the largest single allocation; the other modules do not read it.

mod codec;
mod hostile;
mod java_vectors;
mod json;
mod props;
