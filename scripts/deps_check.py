"""Checks `cargo metadata` output against deps-policy.toml (see scripts/deps-check).

Usage: deps_check.py POLICY.toml METADATA.json. Prints one line per problem and exits 1 when
there is any; stale entries in the duplicates list are reported but do not fail.
"""

import collections
import json
import re
import sys
import tomllib


def spdx_ok(expr, allowed):
    """Whether an SPDX expression (OR, AND, WITH, parentheses, old-style '/') is satisfiable."""
    tokens = re.findall(r"\(|\)|[^\s()]+", expr.replace("/", " OR "))
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def primary():
        if peek() == "(":
            take()
            value = disjunction()
            if take() != ")":
                raise ValueError("unbalanced parentheses")
            return value
        name = take()
        if peek() == "WITH":
            take()
            name = f"{name} WITH {take()}"
        return name in allowed

    def conjunction():
        value = primary()
        while peek() == "AND":
            take()
            value = primary() and value
        return value

    def disjunction():
        value = conjunction()
        while peek() == "OR":
            take()
            value = conjunction() or value
        return value

    try:
        value = disjunction()
    except (IndexError, ValueError):
        return False
    return value and pos == len(tokens)


def version_key(v):
    return tuple(int(x) for x in re.findall(r"\d+", v.split("-")[0].split("+")[0])[:3])


def compat_class(v):
    """Cargo's semver compatibility class: 1.2.3 -> '1', 0.4.1 -> '0.4', 0.0.3 -> '0.0.3'."""
    major, minor, patch = (version_key(v) + (0, 0, 0))[:3]
    if major:
        return str(major)
    return f"0.{minor}" if minor else f"0.0.{patch}"


def main():
    with open(sys.argv[1], "rb") as f:
        policy = tomllib.load(f)
    with open(sys.argv[2]) as f:
        meta = json.load(f)
    allowed = set(policy["licenses"]["allow"])
    problems = []
    external = [p for p in meta["packages"] if p.get("source")]
    for p in external:
        lic = p.get("license")
        if not lic:
            problems.append(f"licence: {p['name']} {p['version']} states no SPDX licence")
        elif not spdx_ok(lic, allowed):
            problems.append(f"licence: {p['name']} {p['version']} is {lic!r}, not allowed")
        for ban in policy.get("bans", []):
            if p["name"] != ban["name"]:
                continue
            below = ban.get("below")
            if below is None or version_key(p["version"]) < version_key(below):
                problems.append(f"banned: {p['name']} {p['version']}: {ban['reason']}")
    classes = collections.defaultdict(set)
    for p in external:
        classes[p["name"]].add(p["version"])
    allowed_dups = policy.get("duplicates", {})
    for name, versions in sorted(classes.items()):
        distinct = {compat_class(v) for v in versions}
        if len(distinct) > 1 and name not in allowed_dups:
            problems.append(
                f"duplicate: {name} in {len(distinct)} incompatible versions "
                f"({', '.join(sorted(versions, key=version_key))}); remove one or add it with "
                "its reason to [duplicates] in deps-policy.toml"
            )
    for name in sorted(allowed_dups):
        if len({compat_class(v) for v in classes.get(name, ())}) < 2:
            print(f"note: {name} is no longer duplicated; remove it from deps-policy.toml")
    for line in problems:
        print(line)
    print(
        f"deps-check: {len(external)} crates, {len(problems)} problem(s) "
        f"({len(allowed_dups)} duplicates allowed with reasons)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
