//! The scenario oracle: the same fault script run once by a Java Dubbo 3.3 consumer
//! (`peers/java` Consumer, Dubbo's own `ReferenceConfig` with the strategy under test) and once by
//! Switchman's `ClusterInvoker`, against the same real Java Dubbo 3.3 providers in ZooKeeper,
//! for every strategy; compares the outcome of each call (the answer, or the kind of failure:
//! business with the provider's exception class, timeout, network, no-provider, ...) and the
//! attempts each provider received.
//!
//! Scenarios (two providers each):
//! - `answer`: `sayHello` on providers exporting with `token=true` (each a random token);
//! - `business`: `fail`, the provider throws `DemoException`;
//! - `timeout`: `slow(600)` under a 200 ms timeout;
//! - `token-retry`: the same on the `token=true` providers with `retries=1`, so that every
//!   retry goes to the other provider (with its own token);
//! - `refusal`: `slow(1)` on providers with `executes=1` whose one slot a call of the test holds
//!   (dubbo:// status 70 from the provider's filter). The refused calls never reach the
//!   method, so only outcomes are compared there;
//! - `tri-business`, `tri-timeout`, `tri-refusal`: the same over Triple;
//! - `rule-timeout`: `slow(300)` under a 100 ms timeout, with a consumer rule as dubbo-admin
//!   writes it (`side: consumer`, `timeout: 2000`) in the config centre: both consumers take
//!   the rule's timeout over their own;
//! - `graceful-stop`: both consumers call `slow(50)` at once while provider `a` is stopped
//!   with SIGTERM (Dubbo's graceful shutdown: a read-only event to connected consumers,
//!   unregistration, then its 2 s wait), a new `a` started at the same time for the next
//!   strategy (it may join while the calls run, as in a rolling restart). Which calls
//!   meet the stop is timing, so the sets of outcomes are compared, not call by call.
//!
//! Known differences are listed under `scenarios:` in `integration-tests/oracle-deviations.yaml`
//! (scenario, strategy, aspect, reason); the test fails on a difference the file does not list
//! and on a listed one that no longer occurs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker, Strategy};
use switchman_core::{ErrorKind, Invocation, Invoker, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_hessian::JavaException;
use switchman_integration_tests::java_peer::{
    self, DEMO_SERVICE, JavaConsumer, JavaProvider, ProviderOptions,
};
use switchman_integration_tests::logs::CapturedLog;
use switchman_integration_tests::{unique, zk_server, zookeeper};
use tracing::instrument::WithSubscriber;

const WAIT: Duration = Duration::from_secs(30);
/// Calls per scenario and strategy, on each side.
const CALLS: usize = 4;
/// Calls of each side in `graceful-stop` (about a second of `slow(50)`).
const CALLS_UNDER_STOP: usize = 20;
/// The strategies compared (Dubbo's names). `mergeable` needs several groups and
/// `zone-aware` several registries: not scenarios of one group here.
const STRATEGIES: [&str; 7] = [
    "failover",
    "failfast",
    "failsafe",
    "failback",
    "forking",
    "broadcast",
    "available",
];

/// One fault script.
#[derive(Clone)]
struct Scenario {
    name: &'static str,
    method: &'static str,
    types: &'static [&'static str],
    args: Value,
    timeout_ms: u64,
    /// `retries` (Dubbo's default 2 when `None`).
    retries: Option<u32>,
    /// Whether the providers' `CALL` lines show every attempt (refused calls never reach the
    /// method).
    attempts_visible: bool,
    /// What happens around the calls.
    script: Script,
}

/// What a scenario does besides calling.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Nothing: `CALLS` calls, one after another.
    Calls,
    /// The calls run under a consumer rule (`side: consumer`, one parameter: key and value)
    /// the test writes to the config centre first and deletes after.
    Rule(&'static str, &'static str),
    /// Both consumers call at once while provider `a` stops gracefully (see the module docs).
    GracefulStop,
}

/// What one call ended in, in words both sides share.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Answer(String),
    Failure(String),
}

fn java_outcome(line: &Value) -> Outcome {
    if line["ok"] == json!(true) {
        return Outcome::Answer(line["result"].to_string());
    }
    let kind = line["kind"].as_str().unwrap_or("other");
    if kind == "business" {
        // "<class>: <message>"
        let class = line["error"]
            .as_str()
            .and_then(|e| e.split(':').next())
            .unwrap_or_default();
        return Outcome::Failure(format!("business {class}"));
    }
    Outcome::Failure(kind.to_string())
}

fn rust_outcome(r: &switchman_core::Result<Value>) -> Outcome {
    match r {
        Ok(v) => Outcome::Answer(v.to_string()),
        Err(e) if e.is_business() => {
            let class = e
                .cause::<JavaException>()
                .map(|j| j.class.clone())
                .unwrap_or_default();
            Outcome::Failure(format!("business {class}"))
        }
        Err(e) => Outcome::Failure(
            match e.kind() {
                ErrorKind::Timeout => "timeout",
                ErrorKind::Transport => "network",
                ErrorKind::NoProvider => "no-provider",
                ErrorKind::Forbidden => "forbidden",
                ErrorKind::LimitExceeded => "limit",
                _ => "other",
            }
            .to_string(),
        ),
    }
}

/// What one side did in one scenario under one strategy.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    outcomes: Vec<Outcome>,
    /// Each failure's message, for the printed table only.
    messages: Vec<String>,
    /// Attempts per provider name (the method's `CALL` lines).
    attempts: BTreeMap<String, usize>,
}

/// An answer with the provider that gave it left out (the balancers draw at random, so which
/// provider answers a given call is not behaviour to compare).
fn anonymous(o: &Outcome) -> Outcome {
    match o {
        Outcome::Answer(a) => Outcome::Answer(
            a.replace("from a\"", "from *\"")
                .replace("from b\"", "from *\""),
        ),
        f => f.clone(),
    }
}

/// The aspects in which the two runs of one scenario and strategy differ: `outcome` (call by
/// call, answers without the provider's name) and `attempts` (how many reached the providers
/// in all; which provider each went to is the balancer's draw).
fn differences(s: &Scenario, strategy: &str, java: &Run, rust: &Run) -> Vec<&'static str> {
    let mut d = Vec::new();
    let outcomes = |r: &Run| r.outcomes.iter().map(anonymous).collect::<Vec<_>>();
    let kinds = |r: &Run| r.outcomes.iter().map(anonymous).collect::<BTreeSet<_>>();
    let same = if s.script == Script::GracefulStop {
        kinds(java) == kinds(rust)
    } else {
        outcomes(java) == outcomes(rust)
    };
    if !same {
        d.push("outcome");
    }
    // Not compared: failback's (it retries in the background, Java every 5 s, Switchman after
    // about 1 s: the counts of a short run are timing, not behaviour) and forking's (Dubbo
    // 3.3.6 starts a fork only while no result is queued and queues the first fork's pending
    // result as soon as it is sent, so whether the second fork is sent is a race: 4 and 8
    // attempts for the same 4 calls in two runs here; Switchman sends `forks` every time).
    if s.attempts_visible && strategy != "failback" && strategy != "forking" {
        let total = |r: &Run| r.attempts.values().sum::<usize>();
        if total(java) != total(rust) {
            d.push("attempts");
        }
    }
    d
}

/// One `scenarios:` entry of `oracle-deviations.yaml`.
#[derive(Debug)]
struct Listed {
    scenario: String,
    /// A strategy's name, or `*` for every strategy.
    strategy: String,
    aspect: String,
    /// A difference that a race in Dubbo makes appear in some runs only: never stale.
    intermittent: bool,
}

impl Listed {
    fn covers(&self, (scenario, strategy, aspect): &(String, String, String)) -> bool {
        self.scenario == *scenario
            && (self.strategy == "*" || self.strategy == *strategy)
            && self.aspect == *aspect
    }
}

/// The `scenarios:` entries of `oracle-deviations.yaml` (each with a `reason`).
fn listed_deviations() -> Vec<Listed> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/oracle-deviations.yaml");
    let text = std::fs::read_to_string(path).expect("oracle-deviations.yaml");
    let doc: Value = serde_norway::from_str(&text).expect("oracle-deviations.yaml parses");
    let mut out: Vec<Listed> = Vec::new();
    for (i, e) in doc["scenarios"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = |k: &str| {
            e[k].as_str()
                .unwrap_or_else(|| panic!("scenarios entry #{}: missing {k}", i + 1))
                .to_string()
        };
        assert!(
            !field("reason").trim().is_empty(),
            "scenarios entry #{}: no reason",
            i + 1
        );
        let entry = Listed {
            scenario: field("scenario"),
            strategy: field("strategy"),
            aspect: field("aspect"),
            intermittent: e["intermittent"] == Value::Bool(true),
        };
        assert!(
            entry.strategy == "*" || STRATEGIES.contains(&entry.strategy.as_str()),
            "scenarios entry #{}: unknown strategy {:?}",
            i + 1,
            entry.strategy
        );
        assert!(
            !out.iter().any(
                |o| (o.scenario.as_str(), o.strategy.as_str(), o.aspect.as_str())
                    == (
                        entry.scenario.as_str(),
                        entry.strategy.as_str(),
                        entry.aspect.as_str()
                    )
            ),
            "scenarios entry #{}: {entry:?} listed twice",
            i + 1
        );
        out.push(entry);
    }
    out
}

struct Fleet {
    group: String,
    /// One Java consumer JVM for every run on this fleet.
    java: std::sync::Mutex<JavaConsumer>,
    providers: Vec<JavaProvider>,
    dir: Arc<RegistryDirectory>,
    transport: Arc<ProtocolInvoker>,
}

/// What a fleet's two providers are: a protocol, provider parameters, JVM flags.
struct Spec {
    tag: &'static str,
    protocol: &'static str,
    params: &'static [(&'static str, &'static str)],
    token: bool,
}

impl Fleet {
    /// Starts every fleet's two providers at once (each a JVM), then subscribes to each.
    async fn start_all(zk: &str, specs: &[Spec]) -> Vec<Fleet> {
        let token = java_peer::token_true_jvm_flags();
        let groups: Vec<String> = specs
            .iter()
            .map(|spec| unique(&format!("scenario-{}", spec.tag)))
            .collect();
        let started: Vec<Vec<JavaProvider>> = tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                let handles: Vec<Vec<_>> = specs
                    .iter()
                    .zip(&groups)
                    .map(|(spec, group)| {
                        ["a", "b"]
                            .map(|name| {
                                let mut o = ProviderOptions::zookeeper(zk)
                                    .protocol(spec.protocol)
                                    .group(group)
                                    .name(name)
                                    .param("warmup", "0");
                                for (k, v) in spec.params {
                                    o = o.param(k, v);
                                }
                                let flags: &[&str] = if spec.token { &token } else { &[] };
                                s.spawn(move || JavaProvider::start_with_jvm_flags(&o, flags))
                            })
                            .into_iter()
                            .collect()
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.into_iter().map(|t| t.join().unwrap()).collect())
                    .collect()
            })
        });
        let mut fleets = Vec::new();
        for (group, providers) in groups.into_iter().zip(started) {
            let reg = registry_from_url(&format!("zookeeper://{zk}")).unwrap();
            let dir = RegistryDirectory::subscribe(
                reg.as_ref(),
                DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, &group, "")),
            )
            .await
            .unwrap();
            dir.wait_until(WAIT, |s| s.endpoints().len() == 2)
                .await
                .unwrap_or_else(|e| panic!("two providers of {group}: {e}"));
            let java = tokio::task::block_in_place(|| {
                JavaConsumer::start(&format!("zookeeper://{zk}"), DEMO_SERVICE)
            });
            fleets.push(Fleet {
                group,
                java: std::sync::Mutex::new(java),
                providers,
                dir: Arc::new(dir),
                transport: Arc::new(ProtocolInvoker::new()),
            });
        }
        fleets
    }

    /// Each provider's `CALL` count of `method`, after every earlier call was read.
    async fn counts(&self, method: &str) -> BTreeMap<String, usize> {
        let snap = self.dir.load();
        let mut out = BTreeMap::new();
        for p in &self.providers {
            p.settle(&snap, self.transport.as_ref()).await;
            out.insert(p.name().to_string(), p.calls_of(method));
        }
        out
    }

    async fn java(&self, s: &Scenario, strategy: &str) -> Run {
        let before = self.counts(s.method).await;
        let progress = AtomicUsize::new(0);
        let (outcomes, messages) =
            tokio::task::block_in_place(|| self.java_calls(s, strategy, CALLS, &progress));
        let attempts = delta(&before, &self.counts(s.method).await);
        Run {
            outcomes,
            messages,
            attempts,
        }
    }

    /// `count` calls of the Java consumer (blocking), `progress` counting those answered.
    fn java_calls(
        &self,
        s: &Scenario,
        strategy: &str,
        count: usize,
        progress: &AtomicUsize,
    ) -> (Vec<Outcome>, Vec<String>) {
        let command = json!({
            "group": self.group,
            "cluster": strategy,
            "method": s.method,
            "types": s.types,
            "args": s.args,
            "count": count,
            "timeout_ms": s.timeout_ms,
            "retries": s.retries,
            // Under a rule: the reference made before the rule was pushed.
            "keep": matches!(s.script, Script::Rule(..)),
        });
        let lines = self
            .java
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .run_counted(&command, progress);
        assert_eq!(
            lines.len(),
            count,
            "the Java consumer answered every call ({strategy}, {}): {lines:?}",
            s.name
        );
        let outcomes = lines.iter().map(java_outcome).collect();
        let messages = lines
            .iter()
            .filter_map(|l| l["error"].as_str().map(str::to_string))
            .collect();
        (outcomes, messages)
    }

    async fn rust(&self, s: &Scenario, strategy: &str) -> Run {
        let before = self.counts(s.method).await;
        let (outcomes, messages) = self
            .rust_calls(s, strategy, CALLS, &AtomicUsize::new(0))
            .await;
        let attempts = delta(&before, &self.counts(s.method).await);
        Run {
            outcomes,
            messages,
            attempts,
        }
    }

    /// `count` calls through a new `ClusterInvoker` with the strategy, `progress` counting
    /// those answered.
    async fn rust_calls(
        &self,
        s: &Scenario,
        strategy: &str,
        count: usize,
        progress: &AtomicUsize,
    ) -> (Vec<Outcome>, Vec<String>) {
        let kind: Strategy = strategy.parse().expect("a strategy name");
        let mut config = ClusterConfig::default()
            .strategy(kind)
            .timeout(Duration::from_millis(s.timeout_ms));
        if let Some(r) = s.retries {
            config = config.retries(r);
        }
        let cluster = ClusterInvoker::new(self.dir.clone(), self.transport.clone(), config);
        let inv = Invocation::new(s.method)
            .with_args(s.args.as_array().cloned().unwrap_or_default())
            .with_types(s.types.iter().copied());
        let mut outcomes = Vec::new();
        let mut messages = Vec::new();
        for _ in 0..count {
            let r = cluster.invoke(&inv).await;
            if let Err(e) = &r {
                messages.push(e.to_string());
            }
            outcomes.push(rust_outcome(&r));
            progress.fetch_add(1, Ordering::Release);
        }
        // Dropping the invoker ends failback's background retries.
        drop(cluster);
        (outcomes, messages)
    }

    /// `graceful-stop` under one strategy: both consumers make [`CALLS_UNDER_STOP`] calls at
    /// once (Switchman's start when the Java consumer has its first answer), and when
    /// Switchman has two answers provider `a` (`stopping`) gets SIGTERM; with `again`, the
    /// next `a` starts then too (a rolling restart: it may join while the calls run), left in
    /// `stopping` for the next strategy. Attempts are not compared: which calls meet the stop
    /// is timing.
    async fn graceful_stop(
        self: &Arc<Self>,
        zk: &str,
        s: &Scenario,
        strategy: &str,
        stopping: &mut Option<JavaProvider>,
        again: bool,
    ) -> (Run, Run) {
        let a = stopping.take().expect("a running provider a");
        let address = a.address();
        self.dir
            .wait_until(WAIT, |snap| {
                snap.endpoints().len() == 2
                    && snap
                        .endpoints()
                        .iter()
                        .any(|e| e.instance.address() == address)
            })
            .await
            .unwrap_or_else(|e| panic!("a running and b in {}: {e}", self.group));
        let (java_progress, rust_progress) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let java = {
            let (fleet, s, strategy, progress) = (
                self.clone(),
                s.clone(),
                strategy.to_string(),
                java_progress.clone(),
            );
            tokio::task::spawn_blocking(move || {
                fleet.java_calls(&s, &strategy, CALLS_UNDER_STOP, &progress)
            })
        };
        until(&java_progress, 1, "the Java consumer's first answer").await;
        let rust = {
            let (fleet, s, strategy, progress) = (
                self.clone(),
                s.clone(),
                strategy.to_string(),
                rust_progress.clone(),
            );
            // Switchman's failed attempts and warnings during these calls, kept with the run's
            // messages: what failsafe and failback answer null for is otherwise not seen.
            let log = CapturedLog::default();
            let writer = log.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter("switchman_cluster=debug,switchman_discovery=debug")
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tokio::spawn(
                async move {
                    let (outcomes, mut messages) = fleet
                        .rust_calls(&s, &strategy, CALLS_UNDER_STOP, &progress)
                        .await;
                    messages.extend(log.text().lines().map(str::to_string));
                    (outcomes, messages)
                }
                .with_subscriber(subscriber),
            )
        };
        until(&rust_progress, 2, "Switchman's first two answers").await;
        let mut a = a;
        let stopped = tokio::task::spawn_blocking(move || a.terminate());
        let next = again.then(|| {
            let o = ProviderOptions::zookeeper(zk)
                .group(&self.group)
                .name("a")
                .param("warmup", "0");
            tokio::task::spawn_blocking(move || JavaProvider::start(&o))
        });
        let (java, rust) = (
            java.await.expect("java side"),
            rust.await.expect("rust side"),
        );
        stopped.await.expect("the stop");
        if let Some(next) = next {
            *stopping = Some(next.await.expect("the next a starts"));
        }
        let run = |(outcomes, messages)| Run {
            outcomes,
            messages,
            attempts: BTreeMap::new(),
        };
        (run(java), run(rust))
    }
}

impl Fleet {
    /// Pushes the rule of `s` (a [`Script::Rule`]) to running consumers: the Java consumer
    /// first makes its reference for every strategy (kept for the runs, as a consumer that
    /// runs while dubbo-admin pushes a rule), then the rule is written; Switchman's directory
    /// applies it (waited for), and the Java consumer's last reference answers `s`'s call
    /// where it failed on the timeout (waited for; each reference hears the same
    /// config-centre event, in the order they were made).
    async fn push_rule(&self, client: &zookeeper_client::Client, s: &Scenario) {
        let Script::Rule(key, value) = s.script else {
            unreachable!("a rule scenario")
        };
        let none = AtomicUsize::new(0);
        for strategy in STRATEGIES {
            tokio::task::block_in_place(|| self.java_calls(s, strategy, 0, &none));
        }
        set_rule(client, self, key, value).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (outcomes, _) = tokio::task::block_in_place(|| {
                self.java_calls(s, STRATEGIES[STRATEGIES.len() - 1], 1, &none)
            });
            // The rule's effect: the slow answer under its longer timeout.
            if matches!(&outcomes[..], [Outcome::Answer(a)] if a != "null") {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the Java consumer applies {key}={value} within {WAIT:?}: {outcomes:?}"
            );
        }
    }

    /// Destroys the Java consumer's kept references.
    fn release(&self) {
        tokio::task::block_in_place(|| {
            self.java
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .run(&json!({ "release": true }))
        });
    }
}

/// Waits (at most [`WAIT`]) until `progress` reaches `n`.
async fn until(progress: &AtomicUsize, n: usize, what: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while progress.load(Ordering::Acquire) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The config-centre node of the consumer rules for `group`'s DemoService.
fn rule_path(group: &str) -> String {
    format!("/dubbo/config/dubbo/{DEMO_SERVICE}::{group}.configurators")
}

/// Writes a consumer rule (`side: consumer`, for every consumer) setting `key: value` for
/// `fleet`'s service, and waits until Switchman's directory applies it. One rule per fleet:
/// a fleet's rule is written once and deleted after its scenario.
async fn set_rule(client: &zookeeper_client::Client, fleet: &Fleet, key: &str, value: &str) {
    let persistent =
        || zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let _ = client.mkdir("/dubbo/config/dubbo", &persistent()).await;
    let rule = format!(
        "configVersion: v3.0\nscope: service\nkey: {}/{DEMO_SERVICE}\nenabled: true\nconfigs:\n- side: consumer\n  parameters:\n    {key}: '{value}'\n",
        fleet.group
    );
    client
        .create(&rule_path(&fleet.group), rule.as_bytes(), &persistent())
        .await
        .expect("the consumer rule is written (one per fleet)");
    fleet
        .dir
        .wait_until(WAIT, |s| {
            s.consumer_overrides().len() == 1
                && s.consumer_overrides().get(key).map(String::as_str) == Some(value)
        })
        .await
        .unwrap_or_else(|e| panic!("the consumer rule {key}={value} reaches the directory: {e}"));
}

/// Deletes the consumer rule and waits until Switchman's directory has dropped it.
async fn clear_rule(client: &zookeeper_client::Client, fleet: &Fleet) {
    client
        .delete(&rule_path(&fleet.group), None)
        .await
        .expect("the consumer rule is deleted");
    fleet
        .dir
        .wait_until(WAIT, |s| s.consumer_overrides().is_empty())
        .await
        .unwrap_or_else(|e| panic!("the consumer rule leaves the directory: {e}"));
}

fn delta(
    before: &BTreeMap<String, usize>,
    after: &BTreeMap<String, usize>,
) -> BTreeMap<String, usize> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_switchman_consumers_agree_on_every_scenario_and_strategy() {
    if java_peer::skipped("java_and_switchman_consumers_agree_on_every_scenario_and_strategy") {
        return;
    }
    let zk = zookeeper();
    let listed = listed_deviations();
    let fleets = Fleet::start_all(
        &zk,
        &[
            Spec {
                tag: "plain",
                protocol: "dubbo",
                params: &[],
                token: false,
            },
            Spec {
                tag: "token",
                protocol: "dubbo",
                params: &[],
                token: true,
            },
            Spec {
                tag: "refusal",
                protocol: "dubbo",
                params: &[("executes", "1")],
                token: false,
            },
            Spec {
                tag: "tri",
                protocol: "tri",
                params: &[],
                token: false,
            },
            Spec {
                tag: "tri-refusal",
                protocol: "tri",
                params: &[("executes", "1")],
                token: false,
            },
            Spec {
                tag: "rules",
                protocol: "dubbo",
                params: &[],
                token: false,
            },
            Spec {
                tag: "stop",
                protocol: "dubbo",
                params: &[],
                token: false,
            },
        ],
    )
    .await;
    // The stopping fleet's `a` belongs to its task (stopped and started again per strategy).
    let mut fleets = fleets;
    let first_a = fleets[6].providers.remove(0);
    assert_eq!(first_a.name(), "a");
    let mut first_a = Some(first_a);
    let fleets: Vec<Arc<Fleet>> = fleets.into_iter().map(Arc::new).collect();
    let [plain, tokens, refusing, tri, tri_refusing, rules, stop] = &fleets[..] else {
        unreachable!("seven fleets")
    };
    // Hold each refusing provider's one `slow` slot for the whole run, with calls of the test's
    // own (not through a cluster).
    let mut holds = Vec::new();
    for fleet in [refusing, tri_refusing] {
        for e in fleet.dir.load().endpoints() {
            let instance = e.instance.clone();
            let transport = fleet.transport.clone();
            holds.push(tokio::spawn(async move {
                transport
                    .invoke(
                        &instance,
                        &Invocation::new("slow")
                            .with_args(vec![json!(300_000)])
                            .with_types(["int"]),
                        Duration::from_secs(400),
                    )
                    .await
            }));
        }
    }
    for p in refusing.providers.iter().chain(&tri_refusing.providers) {
        assert_eq!(
            p.calls_of_settled("slow", 1, WAIT),
            1,
            "the holding call runs on {}",
            p.name()
        );
    }
    let scenarios = [
        (
            tokens,
            Scenario {
                name: "answer",
                method: "sayHello",
                types: &["java.lang.String"],
                args: json!(["oracle"]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            plain,
            Scenario {
                name: "business",
                method: "fail",
                types: &["java.lang.String"],
                args: json!(["boom"]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            plain,
            Scenario {
                name: "timeout",
                method: "slow",
                types: &["int"],
                args: json!([600]),
                timeout_ms: 200,
                retries: None,
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            tokens,
            Scenario {
                name: "token-retry",
                method: "slow",
                types: &["int"],
                args: json!([600]),
                timeout_ms: 200,
                retries: Some(1),
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            refusing,
            Scenario {
                name: "refusal",
                method: "slow",
                types: &["int"],
                args: json!([1]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: false,
                script: Script::Calls,
            },
        ),
        (
            tri,
            Scenario {
                name: "tri-business",
                method: "fail",
                types: &["java.lang.String"],
                args: json!(["boom"]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            tri,
            Scenario {
                name: "tri-timeout",
                method: "slow",
                types: &["int"],
                args: json!([600]),
                timeout_ms: 200,
                retries: None,
                attempts_visible: true,
                script: Script::Calls,
            },
        ),
        (
            tri_refusing,
            Scenario {
                name: "tri-refusal",
                method: "slow",
                types: &["int"],
                args: json!([1]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: false,
                script: Script::Calls,
            },
        ),
        (
            rules,
            Scenario {
                name: "rule-timeout",
                method: "slow",
                types: &["int"],
                args: json!([300]),
                timeout_ms: 100,
                retries: None,
                attempts_visible: true,
                script: Script::Rule("timeout", "2000"),
            },
        ),
        (
            stop,
            Scenario {
                name: "graceful-stop",
                method: "slow",
                types: &["int"],
                args: json!([50]),
                timeout_ms: 3000,
                retries: None,
                attempts_visible: false,
                script: Script::GracefulStop,
            },
        ),
    ];
    // Each fleet's scenarios run on a task of their own, the fleets at once (their providers
    // and Java consumers are separate; most of a run is waiting on JVMs and timeouts).
    let mut tasks = Vec::new();
    for fleet in &fleets {
        let mine: Vec<(usize, Scenario)> = scenarios
            .iter()
            .enumerate()
            .filter(|(_, (f, _))| Arc::ptr_eq(f, fleet))
            .map(|(k, (_, s))| (k, s.clone()))
            .collect();
        let fleet = fleet.clone();
        let zk = zk.clone();
        let mut stopping = if Arc::ptr_eq(&fleet, stop) {
            first_a.take()
        } else {
            None
        };
        tasks.push(tokio::spawn(async move {
            let mut rows = Vec::new();
            for (k, s) in mine {
                let rule = match s.script {
                    Script::Rule(..) => {
                        let client = zk_server::raw_client(&zk, WAIT).await;
                        fleet.push_rule(&client, &s).await;
                        Some(client)
                    }
                    _ => None,
                };
                for (n, strategy) in STRATEGIES.into_iter().enumerate() {
                    let (java, rust) = if s.script == Script::GracefulStop {
                        let again = n + 1 < STRATEGIES.len();
                        fleet
                            .graceful_stop(&zk, &s, strategy, &mut stopping, again)
                            .await
                    } else {
                        (
                            fleet.java(&s, strategy).await,
                            fleet.rust(&s, strategy).await,
                        )
                    };
                    let diff = differences(&s, strategy, &java, &rust);
                    rows.push((k, s.name, strategy, java, rust, diff));
                }
                if let Some(client) = rule {
                    fleet.release();
                    clear_rule(&client, &fleet).await;
                }
            }
            rows
        }));
    }
    let mut rows = Vec::new();
    for t in tasks {
        rows.extend(t.await.expect("a fleet's runs"));
    }
    rows.sort_by_key(|r| r.0);
    let mut found: BTreeMap<(String, String, String), (Run, Run)> = BTreeMap::new();
    let mut table = String::new();
    // Switchman's own target, whatever Java does: no call lost in a graceful stop (an answer
    // from a provider, not failsafe's or failback's empty one).
    let mut lost = Vec::new();
    for (k, name, strategy, java, rust, diff) in rows {
        if scenarios[k].1.script == Script::GracefulStop
            && rust
                .outcomes
                .iter()
                .any(|o| !matches!(o, Outcome::Answer(a) if a != "null"))
        {
            lost.push((strategy, rust.outcomes.clone(), rust.messages.clone()));
        }
        table.push_str(&format!(
            "{:9} {:10} java {:?} {:?} {:?}\n{:20} rust {:?} {:?} {:?}{}\n",
            name,
            strategy,
            java.outcomes,
            java.attempts,
            java.messages.first().map(|m| brief(m)),
            "",
            rust.outcomes,
            rust.attempts,
            rust.messages.first(),
            if diff.is_empty() {
                String::new()
            } else {
                format!("  DIFFERS: {diff:?}")
            }
        ));
        for aspect in diff {
            found.insert(
                (name.to_string(), strategy.to_string(), aspect.to_string()),
                (java.clone(), rust.clone()),
            );
        }
    }
    for h in holds {
        h.abort();
    }
    println!(
        "scenario oracle: {} scenarios x {} strategies, {CALLS} calls each side\n{table}",
        scenarios.len(),
        STRATEGIES.len()
    );
    let unlisted: Vec<_> = found
        .keys()
        .filter(|k| !listed.iter().any(|l| l.covers(k)))
        .collect();
    let stale: Vec<_> = listed
        .iter()
        .filter(|l| !l.intermittent && !found.keys().any(|k| l.covers(k)))
        .collect();
    assert!(
        lost.is_empty(),
        "Switchman lost calls in a graceful stop: {lost:?}\n{table}"
    );
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "differences not in oracle-deviations.yaml: {unlisted:?}; listed but not found (stale): {stale:?}\n{table}"
    );
}

/// A Java failure message for the printed table: the last error Dubbo names (without the
/// provider's long URL) and the start of its cause.
fn brief(m: &str) -> String {
    let last = m.rsplit("Last error is:").next().unwrap_or(m);
    let head = last.split("provider: ").next().unwrap_or(last);
    let cause: String = m[m.find("cause:").unwrap_or(0)..]
        .chars()
        .take(600)
        .collect();
    format!("{head}{cause}")
}
