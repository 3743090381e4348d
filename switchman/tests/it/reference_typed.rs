//! Typed calls (`Reference::call_as`) against real Java Dubbo 3.3 providers in the real
//! ZooKeeper, over dubbo:// and over Triple's Hessian wrapper: Rust structs in and out as the
//! provider's Java classes, parameter types from the Rust types, Java exceptions typed, and
//! the answers no provider sent (failsafe's empty one) read from their JSON.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchman::core::TypedBody;
use switchman::hessian::JavaException;
use switchman::{ClusterConfig, ErrorKind, Invocation, Reference, Strategy};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

use super::demo_user::{User, sample};

async fn reference(group: &str, config: ClusterConfig) -> Reference {
    Reference::new(DEMO_SERVICE)
        .registry(format!("zookeeper://{}", zookeeper()))
        .group(group)
        .config(config)
        .wait(Duration::from_secs(20))
        .connect()
        .await
        .unwrap()
}

/// A typed body that sends `getUser`'s id and keeps the reply's bytes, to see that the
/// protocols use a typed call's bytes both ways (not its JSON arguments, not JSON results).
struct Probe {
    id: i64,
    reply: Mutex<Option<Vec<u8>>>,
}

impl TypedBody for Probe {
    fn write_args(&self, out: &mut Vec<u8>) -> switchman::Result<()> {
        switchman::hessian::Serializer::new(out)
            .write(&self.id)
            .map_err(|e| switchman::Error::bad_config(e.to_string()))
    }
    fn each_arg(&self) -> switchman::Result<Vec<Vec<u8>>> {
        Ok(vec![switchman::hessian::to_vec(&self.id).unwrap()])
    }
    fn read_result(&self, bytes: &[u8]) -> switchman::Result<(usize, serde_json::Value)> {
        let mut de = switchman::hessian::Deserializer::new(bytes);
        let _: User = de
            .read()
            .map_err(|e| switchman::Error::bad_config(e.to_string()))?;
        *self.reply.lock().unwrap() = Some(bytes[..de.position()].to_vec());
        Ok((de.position(), serde_json::json!("read by the typed body")))
    }
}

/// Every typed call one protocol's provider answers.
async fn typed_calls_over(protocol: &str) {
    let g = unique(&format!("typed-{protocol}"));
    let _provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .protocol(protocol)
            .group(&g)
            .name("p"),
    );
    let demo = reference(&g, ClusterConfig::default()).await;

    // The typed body's bytes go out (its JSON argument here is not even a number) and the
    // reply's bytes come to it.
    let probe = Arc::new(Probe {
        id: 9,
        reply: Mutex::new(None),
    });
    let answer = demo
        .invoke(
            &Invocation::new("getUser")
                .with_args(vec![serde_json::json!("not a long")])
                .with_types(["long"])
                .with_typed(probe.clone()),
        )
        .await
        .unwrap();
    assert_eq!(answer, "read by the typed body", "{protocol}");
    let reply = probe
        .reply
        .lock()
        .unwrap()
        .take()
        .expect("the reply's bytes");
    let user: User = switchman::hessian::from_slice(&reply).unwrap();
    assert_eq!(user, sample(9), "{protocol}");

    let sum: i32 = demo.call_as("add", (2, 3)).await.unwrap();
    assert_eq!(sum, 5, "{protocol}: add(int,int)");
    let hello: String = demo.call_as("sayHello", ("typed",)).await.unwrap();
    assert_eq!(hello, "hello, typed from p");
    let user: User = demo.call_as("getUser", (7_i64,)).await.unwrap();
    assert_eq!(
        user,
        sample(7),
        "{protocol}: getUser(long) into a Rust struct"
    );
    // A struct argument goes as the provider's class; it comes back changed.
    let saved: User = demo.call_as("save", (sample(8),)).await.unwrap();
    assert_eq!(
        saved,
        User {
            name: "u8 (saved)".into(),
            ..sample(8)
        }
    );
    let n: i64 = demo.call_as("count", (vec!["a", "b", "c"],)).await.unwrap();
    assert_eq!(n, 3, "{protocol}: count(List)");
    let echoed: HashMap<String, String> = demo
        .call_as(
            "echo",
            (HashMap::from([("k".to_string(), "v".to_string())]),),
        )
        .await
        .unwrap();
    assert_eq!(echoed, HashMap::from([("k".to_string(), "v".to_string())]));
    let none: Option<String> = demo.call_as("nothing", ()).await.unwrap();
    assert_eq!(none, None, "{protocol}: a null answer");
    let () = demo.call_as("ping", ()).await.unwrap();

    // The provider's exception, typed.
    let e = demo
        .call_as::<_, String>("fail", ("boom",))
        .await
        .unwrap_err();
    assert!(e.is_business(), "{protocol}: {e}");
    let thrown = e.cause::<JavaException>().expect("the Java exception");
    assert_eq!(thrown.class, "io.switchman.peers.DemoException");

    // A result that is not what the Rust type says: an error naming the type.
    let e = demo
        .call_as::<_, i64>("sayHello", ("x",))
        .await
        .unwrap_err();
    assert!(e.message().contains("i64"), "{protocol}: {e}");
    // Explicit types where the count does not match the arguments.
    let e = demo
        .call_as_with_types::<_, i32>("add", ["int"], (1, 2))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadConfig);

    // failsafe answers a failed call with null, which no provider sent: read from its JSON.
    let safe = reference(
        &g,
        ClusterConfig::default()
            .strategy(Strategy::Failsafe)
            .timeout(Duration::from_millis(100)),
    )
    .await;
    let swallowed: Option<String> = safe.call_as("slow", (1000,)).await.unwrap();
    assert_eq!(swallowed, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_to_java_over_dubbo() {
    if java_peer::skipped("typed_calls_to_java_over_dubbo") {
        return;
    }
    typed_calls_over("dubbo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_to_java_over_triple() {
    if java_peer::skipped("typed_calls_to_java_over_triple") {
        return;
    }
    typed_calls_over("tri").await;
}
