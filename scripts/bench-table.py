#!/usr/bin/env python3
"""Markdown tables for the call-path, push and end-to-end benchmarks from criterion's
estimates (target/criterion). Usage: scripts/bench-table.py [TARGET_DIR] > tables.md"""
import json
import os
import sys

target = sys.argv[1] if len(sys.argv) > 1 else "target"
root = os.path.join(target, "criterion")
SIZES = ["10", "100", "1000", "10000", "100000"]


def mean_ns(group, ident):
    path = os.path.join(root, group, ident, "new", "estimates.json")
    try:
        with open(path) as f:
            return json.load(f)["mean"]["point_estimate"]
    except FileNotFoundError:
        return None


def groups(prefix):
    if not os.path.isdir(root):
        return []
    return sorted(g for g in os.listdir(root) if g.startswith(prefix))


def cell(v, fmt="{:.1f}"):
    return "–" if v is None else fmt.format(v)


tower = {n: mean_ns("tower_p2c", n) for n in SIZES}
print("| ns per call | " + " | ".join(f"n={int(n):,}" for n in SIZES) + " |")
print("|---|" + "---:|" * len(SIZES))
for prefix in ("call_path_", "route_pick_", "call_path_2threads_"):
    for g in groups(prefix):
        if prefix == "call_path_" and g.startswith("call_path_2threads_"):
            continue
        name = prefix[:-1] + "/" + g[len(prefix):].replace("_", "/")
        vals = [mean_ns(g, n) for n in SIZES]
        print(f"| {name} | " + " | ".join(cell(v) for v in vals) + " |")
print("| tower p2c (reference) | " + " | ".join(cell(tower[n]) for n in SIZES) + " |")
print()
print("Ratio tower p2c / call_path (higher is better for Switchman):")
print()
print("| call_path | " + " | ".join(f"n={int(n):,}" for n in SIZES) + " |")
print("|---|" + "---:|" * len(SIZES))
for g in groups("call_path_"):
    if g.startswith("call_path_2threads_") or not g.endswith("_none"):
        continue
    vals = [mean_ns(g, n) for n in SIZES]
    print(f"| {g[len('call_path_'):].replace('_', '/')} | " + " | ".join(
        "–" if v is None or tower[n] is None else f"{tower[n] / v:.1f}×" for v, n in zip(vals, SIZES)) + " |")
print()
print("| push (ms) | full | 1% changed (whole list) | 1% changed (delta) | one weight override |")
print("|---|---:|---:|---:|---:|")
for n in ["1000", "10000", "100000"]:
    full = mean_ns(f"apply_update_{n}", "full")
    churn = mean_ns(f"apply_update_{n}", "1pct")
    delta = mean_ns(f"apply_update_{n}", "1pct-delta")
    over = mean_ns(f"apply_update_{n}", "override")
    ms = lambda v: cell(v and v / 1e6, '{:.2f}')
    print(f"| {int(n):,} instances | {ms(full)} | {ms(churn)} | {ms(delta)} | {ms(over)} |")
print()
print("| end to end (256 calls, 16 in flight) | calls/s | ratio to raw |")
print("|---|---:|---:|")
for g, raw in (("e2e_http", "raw_reqwest"), ("e2e_triple", "raw_triple")):
    c, r = mean_ns(g, "cluster"), mean_ns(g, raw)
    cps = lambda t: None if t is None else 256 / (t / 1e9)
    print(f"| {g}/cluster (3 providers) | {cell(cps(c), '{:,.0f}')} | {cell(None if c is None or r is None else r / c, '{:.2f}')} |")
    print(f"| {g}/{raw} (1 provider) | {cell(cps(r), '{:,.0f}')} | 1.00 |")
