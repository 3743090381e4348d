//! `switchman lb simulate` end to end: the binary's output, determinism and error handling.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
        .arg("lb")
        .arg("simulate")
        .args(args)
        .output()
        .expect("run switchman")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The pick lines (before the blank line that starts the summary).
fn picks(o: &Output) -> Vec<String> {
    stdout(o)
        .lines()
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn roundrobin_prints_dubbo_sequence_and_shares() {
    let o = run(&[
        "--lb",
        "roundrobin",
        "--instances",
        "a=5,b=1,c=1",
        "--calls",
        "7",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(picks(&o), ["a", "a", "b", "a", "c", "a", "a"]);
    let out = stdout(&o);
    assert!(out.contains("# 7 calls, roundrobin"), "{out}");
    let a_line = out.lines().find(|l| l.starts_with("# a ")).expect(&out);
    assert!(a_line.contains("71.4%"), "{a_line}");
}

#[test]
fn seeded_random_is_repeatable_and_respects_weights() {
    let args = [
        "--lb",
        "random",
        "--instances",
        "x=1,y=0,z=3",
        "--calls",
        "400",
        "--seed",
        "9",
    ];
    let first = run(&args);
    let second = run(&args);
    assert!(first.status.success());
    assert_eq!(picks(&first), picks(&second));
    let p = picks(&first);
    assert_eq!(p.len(), 400);
    assert!(!p.iter().any(|n| n == "y"), "zero weight picked");
    let z = p.iter().filter(|n| *n == "z").count();
    assert!((250..350).contains(&z), "z picked {z} of 400");
}

#[test]
fn consistenthash_keys_from_a_url_file_match_dubbo() {
    let dir = std::env::temp_dir().join(format!("switchman-lb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.txt");
    std::fs::write(
        &file,
        "# three providers\n\
         dubbo://10.20.30.1:20880/com.foo.Bar?interface=com.foo.Bar\n\
         \n\
         dubbo://10.20.30.2:20880/com.foo.Bar?interface=com.foo.Bar&weight=50\n\
         dubbo://10.20.30.3:20880/com.foo.Bar?interface=com.foo.Bar\n",
    )
    .unwrap();
    let o = run(&[
        "--lb",
        "consistenthash",
        "--instances-file",
        file.to_str().unwrap(),
        "--key",
        "alice",
        "--key",
        "bob",
        "--key",
        "",
        "--calls",
        "6",
    ]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(o.status.success(), "{o:?}");
    // Same vectors as the library's Dubbo-compatibility test.
    assert_eq!(
        picks(&o),
        [
            "10.20.30.2:20880",
            "10.20.30.1:20880",
            "10.20.30.3:20880",
            "10.20.30.2:20880",
            "10.20.30.1:20880",
            "10.20.30.3:20880"
        ]
    );
}

#[test]
fn bad_input_exits_2_naming_it() {
    for (args, needle) in [
        (vec!["--lb", "fastest", "--instances", "a=1"], "\"fastest\""),
        (vec!["--lb", "random", "--instances", "a=1,b=x"], "\"x\""),
        (
            vec!["--lb", "random", "--instances", "a=1,,b=2"],
            "empty entry",
        ),
        (vec!["--lb", "random", "--instances", "a=1,a=2"], "\"a\""),
        (
            vec![
                "--lb",
                "random",
                "--instances-file",
                "/nonexistent/switchman.txt",
            ],
            "/nonexistent/switchman.txt",
        ),
        (
            vec![
                "--lb",
                "consistenthash",
                "--instances",
                "a",
                "--hash-nodes",
                "two",
            ],
            "hash.nodes=\"two\"",
        ),
        (vec!["--lb", "random"], "--instances"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
