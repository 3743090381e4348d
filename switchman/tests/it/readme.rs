//! The README's Rust examples are written for a user's crate that depends on `switchman` and
//! the crates its Install section lists, nothing else. They are compiled as doctests of this
//! crate (`src/lib.rs`), whose dev-dependencies also include `switchman-cluster`, `-core`,
//! `-discovery`, ...: a `use switchman_cluster::...` would pass there and fail for a user with
//! `unresolved import`. This test reads the README and fails on any path that starts at a
//! crate the user does not have.

use std::collections::BTreeSet;

const README: &str = include_str!("../../../README.md");

/// Crates a README example may name although Install does not list them, because the text
/// around that example does: `tower` (the per-endpoint layer example), `switchman_build` (a
/// `build.rs`, a build-dependency), and the tracing and OpenTelemetry crates (the tracing
/// section's set-up).
const NAMED_IN_TEXT: &[&str] = &[
    "tower",
    "switchman_build",
    "tracing",
    "tracing_subscriber",
    "tracing_opentelemetry",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
];

/// Path roots that are no crate of the user's dependencies (`i32::abs` is a path too).
const BUILT_IN: &[&str] = &[
    "std", "core", "alloc", "self", "super", "crate", "bool", "char", "str", "i8", "i16", "i32",
    "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32", "f64",
];

/// A fenced Rust block: the line of its opening fence and its code.
#[derive(Debug)]
struct Block {
    line: usize,
    code: String,
}

/// Every fenced block whose info string starts with `rust` (`rust`, `rust,no_run`,
/// `rust,ignore`, ...), hidden doctest lines (`# ...`) included: they are compiled too.
fn rust_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (no, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) if info.trim().split(',').next() == Some("rust") => {
                open = Some(Block {
                    line: no + 1,
                    code: String::new(),
                });
            }
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some(b), None) => {
                b.code.push_str(line);
                b.code.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The dependencies the README's Install section lists (its `toml` block), as crate names.
fn install_dependencies(markdown: &str) -> BTreeSet<String> {
    let section = markdown
        .split("\n## Install\n")
        .nth(1)
        .expect("the README has an Install section");
    let toml = section
        .split("```toml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the Install section has a toml block");
    toml.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(name, _)| name.trim())
        .filter(|name| !name.is_empty() && !name.starts_with('[') && !name.starts_with('#'))
        .map(|name| name.replace('-', "_"))
        .collect()
}

/// The code without its string literals (their text is no path), lines kept.
fn without_strings(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match (in_string, c) {
            (false, '"') => in_string = true,
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => in_string = false,
            (true, '\n') | (false, _) => out.push(c),
            (true, _) => {}
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first segment of every path in `code` (`switchman` in `switchman::cluster::X`,
/// `serde_json` in `use serde_json::json`), with its line in the block; lowercase names only
/// (types and `Self` are not crates), turbofish (`f::<T>`) and method paths excluded.
fn path_roots(code: &str) -> Vec<(usize, String)> {
    let mut roots = Vec::new();
    for (no, line) in without_strings(code).lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if !is_ident(chars[i]) || (i > 0 && is_ident(chars[i - 1])) {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let before = chars[..start].iter().rev().find(|c| !c.is_whitespace());
            let after_path = chars[i..].starts_with(&[':', ':']);
            let turbofish = chars[i..].starts_with(&[':', ':', '<']);
            let continues = matches!(before, Some(':') | Some('.'));
            let lowercase = word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
            if after_path && !turbofish && !continues && lowercase {
                roots.push((no, word));
            }
        }
    }
    roots
}

/// Names a block brings into scope itself: `mod name`, and the last segment (or `as` name) of
/// each `use` item, such as `fastrand` in `use switchman::fastrand;`.
fn local_names(code: &str) -> BTreeSet<String> {
    let code = without_strings(code);
    let mut names = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(rest) = line.strip_prefix("mod ") {
            names.insert(
                rest.split(|c: char| !is_ident(c))
                    .next()
                    .unwrap_or("")
                    .into(),
            );
        }
    }
    for item in code.split("use ").skip(1) {
        let item = item.split(';').next().unwrap_or("");
        for part in item.split([',', '{', '}']) {
            let part = part.trim();
            let name = match part.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => part.rsplit("::").next().unwrap_or(""),
            };
            if !name.is_empty() && name.chars().all(is_ident) {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// What is wrong with the paths of one block, as `line N: ...` messages.
fn problems(block: &Block, dependencies: &BTreeSet<String>) -> Vec<String> {
    let locals = local_names(&block.code);
    let mut out = Vec::new();
    for (no, root) in path_roots(&block.code) {
        let line = block.line + 1 + no;
        if root.starts_with("switchman_") && root != "switchman_build" {
            let stage = root.trim_start_matches("switchman_");
            out.push(format!(
                "README.md line {line}: `{root}::` is not a dependency of a user's crate: write `switchman::{stage}::`"
            ));
        } else if !dependencies.contains(&root)
            && !BUILT_IN.contains(&root.as_str())
            && !NAMED_IN_TEXT.contains(&root.as_str())
            && !locals.contains(&root)
        {
            out.push(format!(
                "README.md line {line}: `{root}::` is a crate the Install section does not list"
            ));
        }
    }
    out
}

#[test]
fn readme_examples_need_only_the_crates_install_lists() {
    let dependencies = install_dependencies(README);
    for needed in ["switchman", "serde", "serde_json", "tokio"] {
        assert!(dependencies.contains(needed), "{dependencies:?}");
    }
    let blocks = rust_blocks(README);
    assert!(blocks.len() >= 15, "{} Rust blocks found", blocks.len());
    let found: Vec<String> = blocks
        .iter()
        .flat_map(|b| problems(b, &dependencies))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The check finds what the issue found: imports through the stage crates, and crates a user
/// was never told to add; strings, turbofish and the block's own modules are no crates.
#[test]
fn the_check_refuses_stage_crates_and_unlisted_crates() {
    let markdown = "text\n\n```rust,no_run\nuse switchman_cluster::{ClusterConfig, Strategy};\nlet k = switchman_core::ServiceKey::new(\"a\");\nlet r = reqwest::Client::new();\n```\n\n```rust\nmod greeter { }\nuse switchman::fastrand;\nlet x = greeter::X; let v: Vec<u8> = fastrand::u8(..); let y = serde_json::from_str::<u8>(\"switchman_core::x\");\nlet p = std::path::Path::new(\"a\"); let z = v.iter().map(i32::abs);\n```\n";
    let blocks = rust_blocks(markdown);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].line, 3);
    let deps: BTreeSet<String> = ["switchman", "serde_json"].map(String::from).into();
    let bad = problems(&blocks[0], &deps);
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(
        bad[0].starts_with("README.md line 4: `switchman_cluster::`")
            && bad[0].ends_with("write `switchman::cluster::`"),
        "{bad:?}"
    );
    assert!(bad[1].contains("line 5: `switchman_core::`"), "{bad:?}");
    assert!(
        bad[2].contains("`reqwest::` is a crate the Install"),
        "{bad:?}"
    );
    assert_eq!(problems(&blocks[1], &deps), Vec::<String>::new());
    let install = "## Install\n\n```toml\n[dependencies]\nswitchman = { path = \"x\" } # or nacos\nserde-json = \"1\"\n```\n";
    assert_eq!(
        install_dependencies(&format!("intro\n{install}")),
        ["serde_json", "switchman"].map(String::from).into()
    );
}
