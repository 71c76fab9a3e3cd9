#!/usr/bin/env python3
"""Fails when the Rust version the project claims is below what its lockfile needs.

Three places name the oldest Rust that builds robots-proxy: `rust-version` in Cargo.toml, the
Dockerfile's builder image (`FROM rust:X.Y-...`) and the README ("the Rust toolchain (X.Y or
newer)"). A `cargo update` may lock a crate whose own `rust-version` is newer; nothing else
notices, because no image is built where the tests run. This script reads every locked
package's `rust_version` from `cargo metadata --locked` and fails when one is above the
project's `rust-version`, or when the Dockerfile or the README names another version.

Usage: .ci/rust-version.py [PROJECT_DIR]   (default: the repository this script is in)
"""
import json
import pathlib
import re
import subprocess
import sys


def version(text):
    """'1.89' or '1.89.0' as a comparable tuple (missing parts are 0)."""
    parts = [int(p) for p in text.strip().split(".")]
    return tuple((parts + [0, 0, 0])[:3])


def shown(v):
    return ".".join(str(p) for p in v)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    manifest = root / "Cargo.toml"
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--manifest-path", str(manifest)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    meta = json.loads(out)
    members = set(meta["workspace_members"])
    own = [p for p in meta["packages"] if p["id"] in members]
    # The workspace's root package claims the version; every crate of the workspace claims the
    # same one.
    root_package = [p for p in own
                    if pathlib.Path(p["manifest_path"]).resolve() == manifest.resolve()]
    if len(root_package) != 1 or not root_package[0].get("rust_version"):
        sys.exit(f"{manifest}: expected its package to have a rust-version")
    claimed = version(root_package[0]["rust_version"])
    errors = []
    for p in own:
        if not p.get("rust_version") or version(p["rust_version"]) != claimed:
            errors.append(f"{p['manifest_path']}: rust-version {p.get('rust_version')}, "
                          f"but the workspace's is {shown(claimed)}")

    needs = sorted(
        ((version(p["rust_version"]), p["name"], p["version"])
         for p in meta["packages"]
         if p["id"] not in members and p.get("rust_version")),
        reverse=True,
    )
    too_new = [n for n in needs if n[0] > claimed]
    for v, name, ver in too_new:
        errors.append(f"the locked {name} {ver} needs Rust {shown(v)}, "
                      f"above Cargo.toml's rust-version {shown(claimed)}")
    highest = needs[0] if needs else None

    dockerfile = (root / "Dockerfile").read_text()
    builders = re.findall(r"^FROM\s+(?:\S+/)?rust:(\d+\.\d+(?:\.\d+)?)\S*", dockerfile, re.M)
    if not builders:
        errors.append("Dockerfile: no `FROM rust:X.Y...` builder stage found")
    for b in builders:
        if version(b) != claimed:
            errors.append(f"Dockerfile: the builder is rust:{b}, "
                          f"but Cargo.toml's rust-version is {shown(claimed)}")

    readme = (root / "README.md").read_text()
    stated = re.findall(r"Rust toolchain \((\d+\.\d+(?:\.\d+)?) or newer\)", readme)
    if not stated:
        errors.append("README.md: no \"Rust toolchain (X.Y or newer)\" found")
    for s in stated:
        if version(s) != claimed:
            errors.append(f"README.md: says Rust {s} or newer, "
                          f"but Cargo.toml's rust-version is {shown(claimed)}")

    if errors:
        print("rust-version check failed:", *errors, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    most = f" (the most any locked crate needs: {highest[1]} {highest[2]}, Rust {shown(highest[0])})" if highest else ""
    print(f"rust-version {shown(claimed)}: Cargo.toml, Dockerfile and README agree{most}")


if __name__ == "__main__":
    main()
