//! The README's `Reference` example and custom balancer, compiled from outside the workspace.

use std::time::Duration;

use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), switchman::Error> {
    // README, "Install" and "A consumer in five lines".
    let greeter = switchman::Reference::new("com.example.Greeter")
        .registry("zookeeper://127.0.0.1:2181") // any registry URL the CLI takes
        .group("g1")
        .version("1.0.0")
        .cluster(switchman::Strategy::Failover)
        .retries(2)
        .timeout(Duration::from_millis(800))
        .connect()
        .await?; // waits for providers (check)
    let reply: Value = greeter.call("sayHello", json!(["world"])).await?;
    println!("{reply}");
    // README, "Typed calls": a struct as the provider's Java class, types from the Rust types.
    let user: User = greeter.call_as("getUser", (7_i64,)).await?;
    let saved: User = greeter.call_as("save", (user,)).await?;
    println!("{saved:?}");
    // README, "Calling Java Dubbo services": the trait, from outside the workspace.
    let users = UserServiceClient::connect(
        UserServiceClient::builder().registry("zookeeper://127.0.0.1:2181"),
    )
    .await?;
    let user = users.get_user(7).await?;
    println!("{user:?} saved: {}", users.save(&user).await?);
    Ok(())
}

#[switchman::interface("org.example.UserService", version = "1.0.0")]
trait UserService {
    async fn get_user(&self, id: i64) -> switchman::Result<User>;
    async fn save(&self, user: &User) -> switchman::Result<bool>;
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename = "org.example.User")]
struct User {
    id: i64,
    name: String,
    #[serde(with = "switchman::hessian::serde::java::date")]
    created: std::time::SystemTime,
}
switchman::java_type!(User => "org.example.User");

// README, "A custom balancer": everything it needs comes from `switchman`.
use std::sync::Arc;
use std::time::SystemTime;

use switchman::fastrand;
use switchman::loadbalance::{Endpoint, LoadBalance, PickContext, Picker};

/// Always the member with the highest weight (ties: the lowest address).
#[derive(Debug)]
pub struct Heaviest;

#[derive(Debug)]
struct HeaviestPicker {
    members: Arc<[u32]>,
    best: Option<usize>,
}

impl LoadBalance for Heaviest {
    fn name(&self) -> &str {
        "heaviest"
    }

    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        _now: SystemTime,
    ) -> Box<dyn Picker> {
        // Once per snapshot and routed subset, never per call.
        let best = members
            .iter()
            .map(|&m| m as usize)
            .max_by_key(|&i| (endpoints[i].instance.weight(), std::cmp::Reverse(i)));
        Box::new(HeaviestPicker { members, best })
    }
}

impl Picker for HeaviestPicker {
    fn pick(&self, _: &[Endpoint], _: &PickContext<'_>, _: &mut fastrand::Rng) -> Option<usize> {
        self.best
    }

    fn members(&self) -> &[u32] {
        &self.members
    }
}

#[allow(dead_code)]
async fn with_a_custom_balancer() -> switchman::Result<switchman::Reference> {
    switchman::Reference::new("com.example.Greeter")
        .registry("zookeeper://127.0.0.1:2181")
        .balancer(Heaviest)
        .connect()
        .await
}
