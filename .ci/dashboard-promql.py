#!/usr/bin/env python3
"""Checks the PromQL of the Grafana dashboard with promtool.

promtool checks rule files, not dashboards: each query of config/grafana/robots-proxy.json
(panel targets and annotations) becomes a recording rule in a temporary rule file, with
Grafana's variables replaced by values ($__rate_interval by 5m, $instance by .*), and
`promtool check rules` parses them all. Which metric names exist is checked by a test
(tests/ops/dashboards.rs) against a running proxy.

Usage: .ci/dashboard-promql.py [DASHBOARD_JSON]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$instance": ".*",
}


def queries(node, where="dashboard"):
    """(place, expr) for every "expr" anywhere in the dashboard."""
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str):
            yield f"{where}: {node.get('title') or node.get('name') or node.get('refId', '')}", node["expr"]
        for key, value in node.items():
            label = f"{where} / {node['title']}" if key == "targets" and "title" in node else where
            yield from queries(value, label)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item, where)


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "config/grafana/robots-proxy.json"
    found = list(queries(json.loads(path.read_text())))
    if not found:
        sys.exit(f"{path}: no queries found")
    rules = []
    for i, (place, expr) in enumerate(found):
        for var, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(var, value)
        if "$" in expr:
            sys.exit(f"{path}: {place}: a Grafana variable this check does not know: {expr}")
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        # JSON is YAML: no YAML library needed.
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        f.flush()
        done = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        for i, (place, _) in enumerate(found):
            print(f"  dashboard:query_{i} is {place}", file=sys.stderr)
        sys.exit(f"{path}: promtool rejects a query")
    print(f"{path}: {len(found)} queries parse")


if __name__ == "__main__":
    main()
