//! `switchman top` driven in tmux (send-keys, capture-pane) against a `switchman call`
//! consumer's admin endpoint over a fleet of three in-process HTTP providers: the three rows
//! appear, a killed provider's row shows it ejected, sort and filter keys work, `q` exits 0, a
//! terminal that is too small ends it with a message; `--once` prints the same table as text,
//! through the admin endpoint and straight from a registry.
//!
//! Needs tmux (`scripts/install-deps` installs it); without it the tmux test says
//! "skipped: no tmux" and passes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
}

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            ProviderReply::Ok(json!({ "from": name }))
        })
    })
    .await
    .unwrap()
}

fn has_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server of its own (`-L`), killed at the end.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// The server starts with a session of its own that outlives the test's sessions: tmux
    /// exits with its last session, and a `new-session` racing that exit fails with "server
    /// exited unexpectedly" (seen once in 10 proof runs, right after `q` ended `top`).
    fn new() -> Tmux {
        let tmux = Tmux {
            socket: format!("switchman-top-{}", std::process::id()),
        };
        tmux.run(&["new-session", "-d", "-s", "keeper", "sleep 3600"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A detached session `name` of `width`x`height` running `command` under sh; its exit
    /// code and stderr go to files in `dir`.
    fn start(&self, name: &str, width: u16, height: u16, command: &str, dir: &Path) {
        let script = format!(
            "{command} 2>{err}; echo $? >{code}",
            err = dir.join(format!("{name}.err")).display(),
            code = dir.join(format!("{name}.code")).display()
        );
        let (w, h) = (width.to_string(), height.to_string());
        self.run(&["new-session", "-d", "-s", name, "-x", &w, "-y", &h, &script]);
    }

    fn screen(&self, name: &str) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Captures `name`'s screen until `ok` holds (at most `limit`).
    fn wait(&self, name: &str, limit: Duration, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let s = self.screen(name);
            if ok(&s) {
                return s;
            }
            assert!(
                started.elapsed() < limit,
                "{what} within {limit:?}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The exit code the session's command wrote, once it wrote it.
fn exit_code(dir: &Path, name: &str, limit: Duration) -> i32 {
    let file = dir.join(format!("{name}.code"));
    let started = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&file)
            && let Ok(c) = s.trim().parse()
        {
            return c;
        }
        assert!(
            started.elapsed() < limit,
            "{name} did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the consumer when the test ends, passed or not.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The screen line that shows `address`.
fn line_of<'a>(screen: &'a str, address: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.contains(address))
}

/// An empty directory of this test's own. Emptied first: process ids repeat (pid_max is 32768
/// here), and a `small.code` left by an earlier run with the same id was once read before the
/// new session's shell had written its own (exit code 1 read, with the new, still empty,
/// `small.err`).
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchman-top-{tag}-{}", std::process::id()));
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("emptying {}: {e}", dir.display()),
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A consumer calling the three providers of `file` until killed; returns it and its admin
/// address.
fn consumer(file: &Path, service: &str) -> (Kill, String) {
    let mut child = bin()
        .args(["call", file.to_str().unwrap(), service, "--method", "hi"])
        .args(["--count", "100000000", "--concurrency", "2", "--admin", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(a) = line.split("admin endpoint on http://").nth(1) {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    let admin = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the consumer prints its admin endpoint");
    (Kill(child), admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_in_tmux_shows_the_fleet_an_ejected_provider_and_quits_on_q() {
    if !has_tmux() {
        println!("skipped: no tmux (scripts/install-deps installs it)");
        return;
    }
    let providers = [
        provider("p1").await,
        provider("p2").await,
        provider("p3").await,
    ];
    let mut providers = providers.map(Some);
    let addrs: Vec<String> = providers
        .iter()
        .map(|p| p.as_ref().unwrap().addr().to_string())
        .collect();
    let dir = scratch("tmux");
    let file = dir.join("providers.yaml");
    let service = "it.top.Echo";
    let list: String = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("  - http://{a}/{service}?zone=z{i}\n"))
        .collect();
    std::fs::write(&file, format!("providers:\n{list}")).unwrap();
    let (_consumer, admin) = tokio::task::spawn_blocking({
        let file = file.clone();
        move || consumer(&file, service)
    })
    .await
    .unwrap();

    let tmux = Tmux::new();
    let top = format!(
        "{} top --admin {admin} --interval 0.3 --window 3",
        env!("CARGO_BIN_EXE_switchman")
    );
    tmux.start("top", 160, 30, &top, &dir);
    let screen = tmux.wait(
        "top",
        Duration::from_secs(20),
        "three routable rows with traffic",
        |s| {
            addrs
                .iter()
                .all(|a| line_of(s, a).is_some_and(|l| l.contains("routable") && l.contains('%')))
                && s.contains("calls/s")
        },
    );
    assert!(screen.contains(service), "{screen}");
    assert!(
        screen.contains("ADDRESS") && screen.contains("P99 ms"),
        "{screen}"
    );
    for (i, a) in addrs.iter().enumerate() {
        assert!(
            line_of(&screen, a).unwrap().contains(&format!("z{i}")),
            "{screen}"
        );
    }

    // Kill p2: connection refused, five strikes, ejected (30 s ± 20%).
    providers[1].take().unwrap().stop();
    let screen = tmux.wait("top", Duration::from_secs(20), "p2 ejected", |s| {
        line_of(s, &addrs[1]).is_some_and(|l| l.contains("ejected"))
    });
    let row = line_of(&screen, &addrs[1]).unwrap();
    let secs: u64 = row
        .split("ejected ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the time left: {row}"));
    assert!((1..=36).contains(&secs), "{row}");
    assert!(screen.contains("1 ejected"), "{screen}");
    for a in [&addrs[0], &addrs[2]] {
        assert!(
            line_of(&screen, a).unwrap().contains("routable"),
            "{screen}"
        );
    }

    // Sort by state: the ejected row first.
    tmux.keys("top", &["s"]);
    let screen = tmux.wait("top", Duration::from_secs(5), "sorted by state", |s| {
        s.contains("sort state")
    });
    let first = screen
        .lines()
        .skip_while(|l| !l.contains("ADDRESS"))
        .nth(1)
        .unwrap_or("");
    assert!(
        first.contains(&addrs[1]),
        "the ejected row first:\n{screen}"
    );
    // Filter on a zone: one row left.
    tmux.keys("top", &["/", "z2", "Enter"]);
    let screen = tmux.wait("top", Duration::from_secs(5), "filtered", |s| {
        s.contains("filter z2") && line_of(s, &addrs[0]).is_none()
    });
    assert!(line_of(&screen, &addrs[2]).is_some(), "{screen}");
    assert!(screen.contains("(1 shown)"), "{screen}");
    tmux.keys("top", &["c"]);
    tmux.wait("top", Duration::from_secs(5), "filter cleared", |s| {
        addrs.iter().all(|a| line_of(s, a).is_some())
    });

    tmux.keys("top", &["q"]);
    assert_eq!(
        exit_code(&dir, "top", Duration::from_secs(10)),
        0,
        "q exits 0"
    );

    // A terminal too small: the view says so and exits (1) instead of drawing a mess.
    tmux.start("small", 40, 6, &top, &dir);
    assert_eq!(exit_code(&dir, "small", Duration::from_secs(10)), 1);
    let err = std::fs::read_to_string(dir.join("small.err")).unwrap();
    assert!(err.contains("40x6") && err.contains("at least"), "{err}");
}

/// `--once`: the same table as text, through the admin endpoint (with the ejected row and the
/// header's rates) and from a registry subscription (no traffic columns); and bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_prints_the_table_as_text() {
    let mut p = [
        provider("q1").await,
        provider("q2").await,
        provider("q3").await,
    ];
    let addrs: Vec<String> = p.iter().map(|p| p.addr().to_string()).collect();
    let dir = scratch("once");
    let file = dir.join("providers.yaml");
    let service = "it.top.Once";
    std::fs::write(
        &file,
        format!(
            "providers:\n  - http://{}/{service}?weight=200&zone=east\n  - http://{}/{service}\n  - http://{}/{service}\n",
            addrs[0], addrs[1], addrs[2]
        ),
    )
    .unwrap();
    p[2].stop();
    let (_consumer, admin) = tokio::task::spawn_blocking({
        let file = file.clone();
        move || consumer(&file, service)
    })
    .await
    .unwrap();
    let run = |args: Vec<String>| async move {
        tokio::task::spawn_blocking(move || bin().args(&args).output().unwrap())
            .await
            .unwrap()
    };
    // Wait until the dead instance is ejected; then the next table's interval is all after
    // the ejection.
    let started = Instant::now();
    let mut ejected = false;
    let text = loop {
        let out = run(vec![
            "top".into(),
            "--admin".into(),
            admin.clone(),
            "--once".into(),
            "--interval".into(),
            "0.5".into(),
            "--sort".into(),
            "weight".into(),
        ])
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        if line_of(&text, &addrs[2]).is_some_and(|l| l.contains("ejected")) {
            if ejected {
                break text;
            }
            ejected = true;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "ejected within 20 s:\n{text}"
        );
    };
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{service} via admin http://{admin} |")),
        "{text}"
    );
    assert!(lines[0].ends_with("random + failover"), "{text}");
    assert!(
        lines[1].starts_with("calls/s ") && !lines[1].starts_with("calls/s -"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("instances 3: 1 ejected, 2 routable"),
        "{text}"
    );
    assert!(lines[4].starts_with("ADDRESS"), "{text}");
    // Sorted by weight: the weight-200 instance first.
    assert!(
        lines[5].starts_with(&addrs[0]) && lines[5].contains("east"),
        "{text}"
    );
    let share = |addr: &str| -> f64 {
        let l = line_of(&text, addr).unwrap();
        l.split_whitespace()
            .find_map(|w| w.strip_suffix('%')?.parse().ok())
            .unwrap_or_else(|| panic!("a share in {l}"))
    };
    // Weights 200 and 100; the ejected one takes no more attempts in the interval.
    assert!(share(&addrs[0]) > share(&addrs[1]), "{text}");
    assert_eq!(share(&addrs[2]), 0.0, "{text}");

    // From the registry: the rows, no traffic.
    let out = run(vec![
        "top".into(),
        file.to_str().unwrap().into(),
        service.into(),
        "--once".into(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("registry view"), "{text}");
    for a in &addrs {
        let l = line_of(&text, a).unwrap_or_else(|| panic!("{a} in\n{text}"));
        assert!(l.contains("routable") && l.contains(" - "), "{text}");
    }
    assert!(line_of(&text, &addrs[0]).unwrap().contains("200"), "{text}");

    // Bad input is named.
    let out = run(vec![
        "top".into(),
        "--admin".into(),
        admin.clone(),
        "--once".into(),
        "--sort".into(),
        "fastest".into(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"fastest\""));
    let out = run(vec!["top".into(), "--once".into()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("REGISTRY SERVICE"));
    let out = run(vec![
        "top".into(),
        "--admin".into(),
        admin,
        "--once".into(),
        "it.top.Nope".into(),
        "--timeout".into(),
        "1".into(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("it.top.Nope") && err.contains(service),
        "{err}"
    );
}

/// A service nothing in the registry matches: `--once` says so and what the registry has
/// instead (as `watch` does), exit 2, instead of an empty table.
#[test]
fn top_once_on_a_service_nothing_matches_says_so() {
    let dir = scratch("nothing");
    let file = dir.join("providers.yaml");
    std::fs::write(
        &file,
        "providers:\n  - http://192.0.2.1:8080/demo.Echo\n  - http://192.0.2.2:8080/demo.Echo?version=2.0.0&group=g1\n",
    )
    .unwrap();
    let file = file.to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = bin()
            .args(["top", "--once", "--timeout", "1"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[&file, "demo.Echo", "--version", "3.0.0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "switchman top: nothing in {file} matches demo.Echo:3.0.0; the registry has it \
             registered without version or group, version 2.0.0 in group g1"
        )),
        "{err}"
    );
    let (code, err) = run(&[&file, "demo.Echoo"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("the registry lists no provider of demo.Echoo in any group or version"),
        "{err}"
    );
    // The right key: the table, exit 0.
    let (code, err) = run(&[&file, "demo.Echo"]);
    assert_eq!(code, Some(0), "{err}");
}
