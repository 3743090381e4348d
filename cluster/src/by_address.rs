//! What the endpoints at one address share (their connections), made for the first of them
//! and dropped with the last.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The value for each address that some endpoint still holds. Looked up only when an
/// endpoint is made, never on the call path.
pub(crate) struct SharedByAddress<T> {
    held: Mutex<HashMap<String, Weak<T>>>,
}

impl<T> Default for SharedByAddress<T> {
    fn default() -> Self {
        SharedByAddress {
            held: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Default> SharedByAddress<T> {
    /// The value the other live endpoints at `address` share, else a new one.
    pub(crate) fn get(&self, address: &str) -> Arc<T> {
        let mut map = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = map.get(address).and_then(Weak::upgrade) {
            return v;
        }
        // Forget the addresses whose endpoints are all gone, now and then (amortised O(1)).
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        let v = Arc::new(T::default());
        map.insert(address.to_string(), Arc::downgrade(&v));
        v
    }
}
