//! Shared by the CLI tests that start `switchman provider`.

use std::io::{BufRead, BufReader};
use std::process::Child;

use serde_json::Value;

/// The first line a `switchman provider` prints on stdout (its `serving` event, as JSON),
/// asserted to be that event. The caller owns `child` already, so that it is killed if this
/// panics.
pub fn serving_line(child: &mut Child) -> Value {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("the provider's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(v["event"], "serving", "{v}");
    v
}
