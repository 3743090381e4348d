//! `io.switchman.peers.User` (the Java peers' POJO) as a Rust type, for the typed-call tests.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// `io.switchman.peers.User`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.User")]
pub struct User {
    pub id: i64,
    pub name: String,
    pub age: i32,
    pub score: f64,
    pub active: bool,
    #[serde(with = "switchman::hessian::serde::java::date")]
    pub created: SystemTime,
    pub tags: Vec<String>,
    pub attributes: HashMap<String, i32>,
}

switchman::java_type!(User => "io.switchman.peers.User");

/// What `User.sample(id)` makes on the Java side.
pub fn sample(id: i64) -> User {
    User {
        id,
        name: format!("u{id}"),
        age: 20 + id as i32,
        score: id as f64 * 1.5,
        active: id % 2 == 0,
        created: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + id as u64),
        tags: vec![format!("t{id}")],
        attributes: HashMap::from([("n".to_string(), id as i32)]),
    }
}
