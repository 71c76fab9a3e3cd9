#!/usr/bin/env python3
"""Checks the Kubernetes manifests in config/kubernetes/.

* configmap.yaml must hold config/robots-proxy.toml exactly (`--write` makes it from the file);
* every manifest must validate against the Kubernetes schemas, offline: kubernetes-validate
  (PyPI) bundles them, so no cluster and no download is needed;
* with --binary PATH, the Deployment's configuration (the ConfigMap's file and the container's
  ROBOTS_PROXY_* environment, its mount paths moved to a temporary directory holding a CA made
  by `ca init`) must pass that binary's `robots-proxy config check`.

Usage: .ci/kubernetes.py [--write] [--binary target/debug/robots-proxy]
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile

# The Kubernetes version whose schemas the manifests are checked against.
KUBERNETES = "1.34.0"

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "config/robots-proxy.toml"
CONFIGMAP = ROOT / "config/kubernetes/configmap.yaml"
HEAD = """\
# GENERATED from config/robots-proxy.toml by `.ci/kubernetes.py --write`; .ci/run fails when the
# two differ. The shipped configuration, every key at its default: the Deployment's environment
# (ROBOTS_PROXY_*) sets what differs in a cluster. Edit this ConfigMap in your own copy.
apiVersion: v1
kind: ConfigMap
metadata:
  name: robots-proxy
  labels:
    app.kubernetes.io/name: robots-proxy
data:
  robots-proxy.toml: |
"""


def configmap():
    text = SHIPPED.read_text()
    if "\t" in text or not text.endswith("\n") or text.startswith(" "):
        sys.exit(f"{SHIPPED}: cannot be a YAML literal block as it is (tabs, or no final newline)")
    body = "".join(f"    {line}" if line.strip() else "\n" for line in text.splitlines(True))
    return HEAD + body


def check_environment(binary):
    """`config check` of the Deployment's configuration, as a pod would have it."""
    import yaml

    deployment = yaml.safe_load((ROOT / "config/kubernetes/deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "robots-proxy")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # Where the pod's volumes are mounted, here: the ConfigMap's file is the shipped one.
        mounts = {m["mountPath"]: tmp / m["name"] for m in container["volumeMounts"]}
        config_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")
        mounts[config_mount] = ROOT / "config"
        ca_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "ca")
        subprocess.run([binary, "ca", "init", "--dir", mounts[ca_mount]], check=True, capture_output=True)
        fields = {"metadata.name": "robots-proxy-5d8c7b9f4-x2k8q", "metadata.namespace": "crawling"}
        env = {"PATH": os.environ.get("PATH", "")}
        for var in container["env"]:
            value = var.get("value")
            if value is None:
                value = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
            # Kubernetes expands $(NAME) from the variables before it.
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)
            for mount in sorted(mounts, key=len, reverse=True):
                if value == mount or value.startswith(mount + "/"):
                    value = str(mounts[mount]) + value[len(mount):]
                    break
            env[var["name"]] = value
        done = subprocess.run([binary, "config", "check"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        sys.exit("the Deployment's configuration fails `robots-proxy config check`")
    print("deployment.yaml: its configuration passes `robots-proxy config check`")


def main():
    want = configmap()
    if "--write" in sys.argv[1:]:
        CONFIGMAP.write_text(want)
        print(f"wrote {CONFIGMAP}")
    import yaml  # kubernetes-validate's dependency (PyYAML)

    embedded = yaml.safe_load(CONFIGMAP.read_text())["data"]["robots-proxy.toml"]
    if embedded != SHIPPED.read_text() or CONFIGMAP.read_text() != want:
        sys.exit(f"{CONFIGMAP} does not hold {SHIPPED} as it is: run .ci/kubernetes.py --write")
    print(f"{CONFIGMAP.name}: holds config/robots-proxy.toml")
    manifests = sorted(str(p) for p in (ROOT / "config/kubernetes").glob("*.yaml"))
    done = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", KUBERNETES, *manifests]
    )
    if done.returncode != 0:
        sys.exit("kubernetes-validate rejects a manifest")
    if "--binary" in sys.argv[1:]:
        check_environment(sys.argv[sys.argv.index("--binary") + 1])


if __name__ == "__main__":
    main()
