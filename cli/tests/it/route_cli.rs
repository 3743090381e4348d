//! `switchman route`: the dry-run tool, run as a process.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const PROVIDERS: &str = "\
# two zones, one tagged provider
dubbo://10.0.0.1:20880/com.foo.Bar?zone=z1&application=prov
dubbo://10.0.0.2:20881/com.foo.Bar?zone=z2&application=prov

dubbo://10.0.0.3:20880/com.foo.Bar?zone=z1&application=prov&dubbo.tag=gray
";

struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("switchman-route-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("providers.txt"), PROVIDERS).unwrap();
        Fixture { dir }
    }

    fn rule(&self, text: &str) -> String {
        let p = self.dir.join("rule.txt");
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    fn run(&self, rule: &str, extra: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchman"));
        cmd.args(["route", "--rule", rule, "--consumer"])
            .arg("consumer://10.9.9.9/com.foo.Bar?application=shop&zone=z2")
            .arg("--providers")
            .arg(self.dir.join("providers.txt"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn prints_kept_providers_in_input_order() {
    let f = Fixture::new("kept");
    let rule = f.rule("method = find* => zone = z1,z2 & port = 20880,20881\n");
    let o = f.run(&rule, &["--method", "findAll"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "dubbo://10.0.0.1:20880/com.foo.Bar?zone=z1&application=prov\n\
         dubbo://10.0.0.2:20881/com.foo.Bar?zone=z2&application=prov\n"
    );
    // `$zone` reads the consumer's zone.
    let rule = f.rule("=> zone = $zone\n");
    let o = f.run(&rule, &[], None);
    assert_eq!(
        stdout(&o),
        "dubbo://10.0.0.2:20881/com.foo.Bar?zone=z2&application=prov\n"
    );
}

#[test]
fn rule_from_stdin_yaml_and_arguments() {
    let f = Fixture::new("stdin");
    let yaml = "configVersion: v3.0\nforce: true\nconditions:\n  - arguments[0] = 1~10 & attachments[user] = vip => zone = z1\n";
    let o = f.run(
        "-",
        &["--method", "m", "--arg", "5", "--attachment", "user=vip"],
        Some(yaml),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "dubbo://10.0.0.1:20880/com.foo.Bar?zone=z1&application=prov\n"
    );
    // Argument out of range: rule does not apply.
    let o = f.run(
        "-",
        &["--method", "m", "--arg", "50", "--attachment", "user=vip"],
        Some(yaml),
    );
    assert_eq!(stdout(&o).lines().count(), 2);
}

#[test]
fn tag_attachment_and_force() {
    let f = Fixture::new("tag");
    let rule = f.rule("=> zone = z1,z2\n");
    let o = f.run(&rule, &["--attachment", "dubbo.tag=gray"], None);
    assert_eq!(
        stdout(&o),
        "dubbo://10.0.0.3:20880/com.foo.Bar?zone=z1&application=prov&dubbo.tag=gray\n"
    );
    // --force: an empty result forbids the call; nothing is printed.
    let rule = f.rule("=> zone = nowhere\n");
    let o = f.run(&rule, &[], None);
    assert_eq!(stdout(&o).lines().count(), 2, "not forced: rule ignored");
    let o = f.run(&rule, &["--force"], None);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "");
}

#[test]
fn bad_rule_exits_2_with_the_error() {
    let f = Fixture::new("bad");
    let rule = f.rule("method = a => host = b\nmethod = a && b => host = c\n");
    let o = f.run(&rule, &[], None);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("&&"), "{err}");
    assert_eq!(stdout(&o), "");
}

#[test]
fn explain_says_which_rule_and_why() {
    let f = Fixture::new("explain");
    let rule = f.rule("method = find* => zone = z1\n");
    let o = f.run(&rule, &["--method", "findX", "--explain"], None);
    assert!(o.status.success());
    let err = stderr(&o);
    assert!(err.contains("when matches"), "{err}");
    assert!(err.contains("`zone` is `z2`"), "{err}");
    assert!(err.contains("it has tag `gray`"), "{err}");
    assert!(err.contains("result: 1 provider(s)"), "{err}");
    assert_eq!(
        stdout(&o),
        "dubbo://10.0.0.1:20880/com.foo.Bar?zone=z1&application=prov\n"
    );
    let blocked = f.rule("method = save =>\n");
    let o = f.run(&blocked, &["--method", "save", "--explain"], None);
    assert!(stderr(&o).contains("forbidden"), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
}

#[test]
fn a_rule_that_parses_only_leniently_is_warned_about() {
    let f = Fixture::new("lenient");
    // No `=>` and no `&`: Dubbo reads "method = find* & zone = z1" as a then part.
    let o = f.run(
        &f.rule("method = find* zone = z1\n"),
        &["--method", "findX"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("warning: line 1") && err.contains("has no `=>`"),
        "{err}"
    );
    assert!(
        err.contains("`zone` starts a condition without `&`"),
        "{err}"
    );
    let o = f.run(
        &f.rule("method = find* => zone\n"),
        &["--method", "findX"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("then part: `zone` has no value"),
        "{}",
        stderr(&o)
    );
    // A clean rule: no warning.
    let o = f.run(
        &f.rule("method = find* => zone = z1\n"),
        &["--method", "findX"],
        None,
    );
    assert!(o.status.success());
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// `--registry` instead of `--providers`: the providers a registry lists now for the consumer
/// URL's interface, group and version (a static registry file here; TEST-NET addresses that
/// nothing serves: route only reads the list).
#[test]
fn providers_can_come_from_a_registry() {
    let f = Fixture::new("registry");
    let registry = f.dir.join("registry.yaml");
    std::fs::write(
        &registry,
        "providers:\n  - dubbo://192.0.2.1:20880/com.foo.Bar?zone=z1&version=1.0.0\n  - dubbo://192.0.2.2:20880/com.foo.Bar?zone=z2&version=1.0.0\n  - dubbo://192.0.2.3:20880/com.foo.Bar?zone=z2\n",
    )
    .unwrap();
    let rule = f.rule("=> zone = z2");
    let run = |consumer: &str| {
        Command::new(env!("CARGO_BIN_EXE_switchman"))
            .args([
                "route",
                "--rule",
                &rule,
                "--consumer",
                consumer,
                "--registry",
            ])
            .arg(&registry)
            .output()
            .unwrap()
    };
    let out = run("consumer://10.9.9.9/com.foo.Bar?application=shop&version=1.0.0");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].starts_with("dubbo://192.0.2.2:20880/com.foo.Bar?"),
        "{kept:?}"
    );
    assert!(kept[0].contains("version=1.0.0"), "{kept:?}");

    let out = run("consumer://10.9.9.9/com.foo.Baz?application=shop");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lists no provider of com.foo.Baz"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let both = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .args([
            "route",
            "--rule",
            &rule,
            "--consumer",
            "consumer://h/com.foo.Bar",
        ])
        .arg("--registry")
        .arg(&registry)
        .arg("--providers")
        .arg(f.dir.join("providers.txt"))
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "one source of providers");
}
