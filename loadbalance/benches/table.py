#!/usr/bin/env python3
"""Prints the Markdown table of the `pick` benchmark from criterion's estimates.

Usage: python3 loadbalance/benches/table.py [TARGET_DIR]   (default: target)
Each cell is criterion's point estimate of the mean, in ns per pick (or per request).
"""
import json
import os
import sys

target = sys.argv[1] if len(sys.argv) > 1 else "target"
root = os.path.join(target, "criterion")
sizes = ["10", "100", "1000", "10000", "100000"]
rows = []
for group in sorted(os.listdir(root)):
    if not group.startswith(("pick_", "request_", "key_")):
        continue
    cells = []
    for n in sizes:
        path = os.path.join(root, group, n, "new", "estimates.json")
        try:
            with open(path) as f:
                ns = json.load(f)["mean"]["point_estimate"]
            cells.append(f"{ns:.1f}")
        except FileNotFoundError:
            cells.append("–")
    rows.append((group.replace("_", "/"), cells))

order = ["pick/random", "pick/roundrobin", "pick/leastactive", "pick/shortestresponse",
         "pick/consistenthash", "pick/p2c", "key/md5-only", "request/p2c+call", "request/tower-p2c"]
def key(row):
    name = row[0]
    for i, prefix in enumerate(order):
        if name.startswith(prefix + "/"):
            return (i, name)
    return (len(order), name)

print("| benchmark (ns) | " + " | ".join(f"n={int(n):,}" for n in sizes) + " |")
print("|---|" + "---:|" * len(sizes))
for name, cells in sorted(rows, key=key):
    print(f"| {name} | " + " | ".join(cells) + " |")
