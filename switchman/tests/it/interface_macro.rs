//! `#[switchman::interface]` against a real Java Dubbo 3.3 provider in the real ZooKeeper, over
//! dubbo:// and Triple's Hessian wrapper: the generated client's methods are the Java methods
//! (camelCase names, `#[java(name)]`, explicit `types`), borrowed arguments are sent owned, the
//! method's `timeout`/`retries` apply and a `CallContext` argument's attachments go over them.
//! Over dubbo:// the client connects through `DemoClient::builder()`, over Triple from the
//! trait alone (`<dyn Demo>::connect(Reference::new_for::<dyn Demo>()..)`).

use std::time::Duration;

use switchman::hessian::JavaException;
use switchman::{CallContext, JavaInterface, Reference};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

use super::demo_user::{User, sample};

/// `io.switchman.peers.DemoService`, as a Rust trait.
#[switchman::interface("io.switchman.peers.DemoService")]
trait Demo {
    /// `sayHello(String)`.
    async fn say_hello(&self, name: String) -> switchman::Result<String>;
    async fn add(&self, a: i32, b: i32) -> switchman::Result<i32>;
    async fn get_user(&self, id: i64) -> switchman::Result<User>;
    #[java(name = "save")]
    async fn store(&self, user: User) -> switchman::Result<User>;
    /// A borrowed struct, cloned into the call; the type given explicitly.
    #[java(name = "save", types = ["io.switchman.peers.User"])]
    async fn store_ref(&self, user: &User) -> switchman::Result<User>;
    /// A borrowed `str`, sent as a `String`.
    #[java(name = "sayHello")]
    async fn greet(&self, name: &str) -> switchman::Result<String>;
    async fn count(&self, items: Vec<String>) -> switchman::Result<i64>;
    /// The caller's own error type, from `switchman::Error`.
    #[java(name = "add")]
    async fn add_or(&self, a: i32, b: i32) -> Result<i32, AppError>;
    #[java(name = "fail")]
    async fn fail_or(&self, m: String) -> Result<String, AppError>;
    async fn nothing(&self) -> switchman::Result<Option<String>>;
    async fn ping(&self) -> switchman::Result<()>;
    async fn fail(&self, m: String) -> switchman::Result<String>;
    /// `slow(int)` with a 100 ms timeout and no retry, unless the context says otherwise.
    #[java(name = "slow", timeout = 100, retries = 0)]
    async fn slow_briefly(&self, ms: i32, ctx: &CallContext) -> switchman::Result<String>;
    /// The provider's view of a request attachment.
    async fn attachment(&self, key: String, ctx: CallContext) -> switchman::Result<Option<String>>;
}

/// An application's error type.
#[derive(Debug)]
struct AppError(switchman::Error);

impl From<switchman::Error> for AppError {
    fn from(e: switchman::Error) -> Self {
        AppError(e)
    }
}

/// A function generic over the trait: the client is one implementation of it.
async fn sum(demo: &impl Demo) -> i32 {
    demo.add(40, 2).await.unwrap()
}

/// How the test connects the client: through the client type, or from the trait alone
/// (`Reference::new_for::<dyn Demo>()` and `<dyn Demo>::connect`).
#[derive(Debug, Clone, Copy)]
enum Connect {
    Client,
    Trait,
}

async fn interface_over(protocol: &str, connect: Connect) {
    let g = unique(&format!("iface-{protocol}"));
    let _provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .protocol(protocol)
            .group(&g)
            .name("p"),
    );
    assert_eq!(DemoClient::INTERFACE, DEMO_SERVICE);
    assert_eq!(<dyn Demo as JavaInterface>::INTERFACE, DEMO_SERVICE);
    let demo: DemoClient = match connect {
        Connect::Client => DemoClient::connect(
            DemoClient::builder()
                .registry(format!("zookeeper://{}", zookeeper()))
                .group(&g)
                .wait(Duration::from_secs(20)),
        )
        .await
        .unwrap(),
        Connect::Trait => <dyn Demo>::connect(
            Reference::new_for::<dyn Demo>()
                .registry(format!("zookeeper://{}", zookeeper()))
                .group(&g)
                .wait(Duration::from_secs(20)),
        )
        .await
        .unwrap(),
    };

    assert_eq!(
        demo.say_hello("macro".into()).await.unwrap(),
        "hello, macro from p",
        "{protocol}"
    );
    assert_eq!(demo.greet("ref").await.unwrap(), "hello, ref from p");
    assert_eq!(demo.add(2, 3).await.unwrap(), 5, "{protocol}: add(int,int)");
    assert_eq!(sum(&demo).await, 42);
    assert_eq!(demo.add_or(1, 2).await.unwrap(), 3, "{protocol}");
    assert_eq!(demo.get_user(7).await.unwrap(), sample(7), "{protocol}");
    let saved = User {
        name: "u8 (saved)".into(),
        ..sample(8)
    };
    assert_eq!(demo.store(sample(8)).await.unwrap(), saved, "{protocol}");
    let mine = sample(8);
    assert_eq!(demo.store_ref(&mine).await.unwrap(), saved, "{protocol}");
    assert_eq!(
        mine,
        sample(8),
        "the borrowed argument is the caller's still"
    );
    assert_eq!(
        demo.count(vec!["a".into(), "b".into()]).await.unwrap(),
        2,
        "{protocol}: count(List)"
    );
    assert_eq!(demo.nothing().await.unwrap(), None, "{protocol}");
    demo.ping().await.unwrap();

    let e = demo.fail("boom".into()).await.unwrap_err();
    assert!(e.is_business(), "{protocol}: {e}");
    let thrown = e.cause::<JavaException>().expect("the Java exception");
    assert_eq!(thrown.class, "io.switchman.peers.DemoException");
    assert_eq!(thrown.message.as_deref(), Some("boom"));
    // The same error, as the caller's type.
    let AppError(e) = demo.fail_or("bang".into()).await.unwrap_err();
    assert!(e.is_business(), "{protocol}: {e}");

    // The method's timeout (100 ms) applies; the context's goes over it.
    let e = demo
        .slow_briefly(600, &CallContext::new())
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{protocol}: {e}");
    assert_eq!(
        demo.slow_briefly(300, &CallContext::new().timeout(Duration::from_secs(5)))
            .await
            .unwrap(),
        "slow 300 from p",
        "{protocol}"
    );

    // A context's attachments reach the provider.
    let ctx = CallContext::new().attachment("tenant", "t-42");
    assert_eq!(
        demo.attachment("tenant".into(), ctx)
            .await
            .unwrap()
            .as_deref(),
        Some("t-42"),
        "{protocol}"
    );
    assert_eq!(
        demo.attachment("tenant".into(), CallContext::new())
            .await
            .unwrap(),
        None,
        "{protocol}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interface_client_to_java_over_dubbo() {
    if java_peer::skipped("interface_client_to_java_over_dubbo") {
        return;
    }
    interface_over("dubbo", Connect::Client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interface_client_to_java_over_triple() {
    if java_peer::skipped("interface_client_to_java_over_triple") {
        return;
    }
    interface_over("tri", Connect::Trait).await;
}
