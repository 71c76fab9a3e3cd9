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
            if value is None and "secretKeyRef" in var["valueFrom"]:
                # A Secret's value (the Valkey password): a stand-in of its form (hex).
                value = "0123456789abcdef" * 4
            elif value is None:
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


def check_deployment():
    """What the shipped set-ups must hold (ops H2/M3/M4/C1, issue #40 part 5): Valkey behind a
    password from a Secret and a NetworkPolicy admitting only the proxy's pods, the admin port
    only from the monitoring namespace, a preStop sleep, a volume claim for the state; and the
    compose file the same (password, admin hosts, lower-case http_proxy)."""
    import yaml

    k8s = ROOT / "config/kubernetes"
    problems = []
    deployment = yaml.safe_load((k8s / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "robots-proxy")
    env = {v["name"]: v for v in container["env"]}
    redis = env.get("ROBOTS_PROXY_FLEET__REDIS", {}).get("value", "")
    secret = env.get("VALKEY_PASSWORD", {}).get("valueFrom", {}).get("secretKeyRef", {})
    if "$(VALKEY_PASSWORD)@" not in redis or secret.get("name") != "robots-proxy-valkey":
        problems.append("deployment.yaml: fleet.redis without the password of the Secret robots-proxy-valkey")
    if container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0) < 1:
        problems.append("deployment.yaml: no preStop sleep (rollouts refuse connections)")
    state = next(v for v in pod["volumes"] if v["name"] == "state")
    if "ephemeral" not in state and "persistentVolumeClaim" not in state:
        problems.append("deployment.yaml: the state volume (the archive) is no volume claim")
    valkey = [d for d in yaml.safe_load_all((k8s / "valkey.yaml").read_text()) if d["kind"] == "StatefulSet"][0]
    vc = valkey["spec"]["template"]["spec"]["containers"][0]
    if "--requirepass" not in vc["command"] or not any(
        v.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "robots-proxy-valkey" for v in vc.get("env", [])
    ):
        problems.append("valkey.yaml: Valkey asks for no password from the Secret robots-proxy-valkey")
    policies = {p["metadata"]["name"]: p for p in yaml.safe_load_all((k8s / "networkpolicy.yaml").read_text())}
    proxy_pods = deployment["spec"]["template"]["metadata"]["labels"]
    vp = policies.get("robots-proxy-valkey", {}).get("spec", {})
    froms = [f for rule in vp.get("ingress", []) for f in rule.get("from", [])]
    if vp.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component") != "valkey" or not froms or any(
        f.get("podSelector", {}).get("matchLabels") != proxy_pods or "namespaceSelector" in f for f in froms
    ):
        problems.append("networkpolicy.yaml: Valkey is not reachable from the proxy's pods only")
    pp = policies.get("robots-proxy", {}).get("spec", {})
    for rule in pp.get("ingress", []):
        if any(p.get("port") == 9090 for p in rule.get("ports", [])):
            names = [f.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name") for f in rule.get("from", [])]
            if names != ["monitoring"]:
                problems.append("networkpolicy.yaml: the admin port is open beyond the monitoring namespace")
    if not any(9090 in [p.get("port") for p in r.get("ports", [])] for r in pp.get("ingress", [])):
        problems.append("networkpolicy.yaml: no rule for the admin port")
    compose = (ROOT / "config/fleet/compose.yaml").read_text()
    doc = yaml.safe_load(compose)
    if "--requirepass" not in doc["services"]["valkey"]["command"] or "${VALKEY_PASSWORD" not in compose:
        problems.append("compose.yaml: Valkey asks for no password")
    for n in "123":
        proxy = doc["services"][f"proxy-{n}"]
        published = proxy["ports"][0].split(":")[1]
        hosts = proxy["environment"].get("ROBOTS_PROXY_ADMIN__HOSTS", "")
        if f"localhost:{published}" not in hosts.split(","):
            problems.append(f"compose.yaml: proxy-{n}'s admin listener does not answer localhost:{published}")
        if "${VALKEY_PASSWORD" not in proxy["environment"]["ROBOTS_PROXY_FLEET__REDIS"]:
            problems.append(f"compose.yaml: proxy-{n} has no Valkey password")
    if re.search(r"export HTTP_PROXY=", compose):
        problems.append("compose.yaml: export HTTP_PROXY (curl ignores it: use http_proxy)")
    if problems:
        sys.exit("\n".join(problems))
    print("deployment, valkey, networkpolicy and compose: password, policies, preStop, volume claim")


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
    check_deployment()
    if "--binary" in sys.argv[1:]:
        check_environment(sys.argv[sys.argv.index("--binary") + 1])


if __name__ == "__main__":
    main()
