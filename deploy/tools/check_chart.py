#!/usr/bin/env python3
"""Checks the Helm chart, the image Dockerfiles and the Grafana dashboard
against the code. deploy/check.sh installs what this needs, builds the
renders the chart with real Helm (scripts/setup-helm.sh installs it) and
runs this; docs/install.md, "How CI checks the chart", sums up what is checked.

  check_chart.py --helm BIN [--repo DIR] [--build-dir DIR] [--work DIR]
  check_chart.py --helm BIN --self-test
  check_chart.py --helm BIN --render-only OUT.yaml --kube-version V --namespace NS

Exit codes: 0 every check passed, 1 a check failed, 2 cannot run.
"""

import argparse
import base64
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

try:
    import yaml
except ImportError:
    sys.exit("check_chart.py: python3-yaml is missing; run deploy/check.sh, which installs it")


# --------------------------------------------------------------------------
# What the code does, written down. The scanner below re-derives the API calls
# from the sources and fails when the two disagree, so this table stays true.

# Every Kubernetes API call our daemons make:
# (component, API group, resource, verb, where in the code, why).
API_CALLS = [
    ("hami-scheduler", "", "nodes", "list", "scheduler/run.cpp Reflector(node_path())", "node cache"),
    ("hami-scheduler", "", "nodes", "watch", "scheduler/run.cpp Reflector(node_path())", "node cache"),
    ("hami-scheduler", "", "nodes", "get", "scheduler/k8s_backend.cpp read_modify_patch", "node lock"),
    ("hami-scheduler", "", "nodes", "patch", "scheduler/k8s_backend.cpp read_modify_patch", "node lock"),
    ("hami-scheduler", "", "pods", "list", "scheduler/run.cpp Reflector(core_path(pods))", "pod cache"),
    ("hami-scheduler", "", "pods", "watch", "scheduler/run.cpp Reflector(core_path(pods))", "pod cache"),
    ("hami-scheduler", "", "pods", "get", "scheduler/k8s_backend.cpp get(pod_path)", "bind; node-lock owner"),
    ("hami-scheduler", "", "pods", "patch", "scheduler/events.cpp merge_patch(pod_path)", "labels hami.io/vgpu-node (after bind), hami.io/scheduler-role"),
    ("hami-scheduler", "", "pods/binding", "create", "scheduler/k8s_backend.cpp bind_pod", "the binding"),
    ("hami-scheduler", "", "events", "create", "scheduler/events.cpp create(core_path(events))", "Events on pods"),
    ("hami-scheduler", "", "resourcequotas", "list", "scheduler/run.cpp Reflector(core_path(resourcequotas))", "GPU quotas"),
    ("hami-scheduler", "", "resourcequotas", "watch", "scheduler/run.cpp Reflector(core_path(resourcequotas))", "GPU quotas"),
    ("hami-scheduler", "", "events", "patch", "scheduler/events.cpp merge_patch(core_path(events))", "an Event's count"),
    ("hami-scheduler", "coordination.k8s.io", "leases", "get", "k8s/leader_election.cpp get_lease", "--leader-elect"),
    ("hami-scheduler", "coordination.k8s.io", "leases", "create", "k8s/leader_election.cpp create_lease", "--leader-elect"),
    ("hami-scheduler", "coordination.k8s.io", "leases", "update", "k8s/leader_election.cpp update_lease", "--leader-elect"),
    ("hami-device-plugin", "", "nodes", "get", "deviceplugin/node_registrar.cpp, pending_pod.cpp", "registration, node lock"),
    ("hami-device-plugin", "", "nodes", "patch", "deviceplugin/node_registrar.cpp, allocator.cpp", "registration, lock release"),
    ("hami-device-plugin", "", "pods", "get", "deviceplugin/pending_pod.cpp, allocator.cpp", "the pod the lock names"),
    ("hami-device-plugin", "", "pods", "list", "deviceplugin/pending_pod.cpp list(pod_path(\"\"))", "Pending pods on the node"),
    ("hami-device-plugin", "", "pods", "patch", "deviceplugin/allocator.cpp patch_annotations", "bind-phase, allocation"),
    ("hami-device-plugin", "", "pods", "watch", "deviceplugin/daemon.cpp Reflector(core_path(pods))", "resizes of its running pods"),
    ("hami-node-agent", "", "pods", "list", "monitor/pod_directory_k8s.cpp list(core_path(pods))", "pod names"),
    # Not our code: the kube-scheduler sidecar. Its other rights come from the
    # built-in system:kube-scheduler role, whose lease rights name only
    # "kube-scheduler"; the chart grants its Lease.
    ("kube-scheduler", "coordination.k8s.io", "leases", "get", "KubeSchedulerConfiguration leaderElection", "its Lease"),
    ("kube-scheduler", "coordination.k8s.io", "leases", "create", "KubeSchedulerConfiguration leaderElection", "its Lease"),
    ("kube-scheduler", "coordination.k8s.io", "leases", "update", "KubeSchedulerConfiguration leaderElection", "its Lease"),
]
LEASE_CALL = ("coordination.k8s.io", "leases")

# Our binaries and their main files (checked against CMake).
BINARIES = {
    "hami-scheduler": "src/scheduler/main.cpp",
    "hami-device-plugin": "src/deviceplugin/main.cpp",
    "hami-node-agent": "src/monitor/agent_main.cpp",
}
# The files that declare each binary's flags: its own flags file and the
# start-up every daemon shares (common/daemon_main.cpp: --log-level, -v,
# --check-flags, --version).
FLAG_SOURCES = {
    "hami-scheduler": ["src/scheduler/flags.cpp", "src/common/daemon_main.cpp"],
    "hami-device-plugin": ["src/deviceplugin/flags.cpp", "src/common/daemon_main.cpp"],
    "hami-node-agent": ["src/monitor/agent_flags.cpp", "src/common/daemon_main.cpp"],
}
# Sources whose Kubernetes calls belong to each binary.
SOURCE_DIRS = {
    "hami-scheduler": ["src/scheduler"],
    "hami-device-plugin": ["src/deviceplugin"],
    "hami-node-agent": ["src/monitor"],
}
# Flags whose value is a path the container must have mounted; those in
# HOST_SHARED must be a hostPath mounted at the same path (the plugin hands
# kubelet host paths, the agent reads what containers write there).
PATH_FLAGS = {
    "hami-scheduler": ["--cert_file", "--key_file", "--client-ca-file", "--device-config-file",
                       "--decision-key-file"],
    "hami-device-plugin": ["--config-file", "--node-config-file", "--device-plugin-path", "--hook-path", "--lock-dir",
                           "--decision-key-file"],
    "hami-node-agent": ["--hook-path"],
}
HOST_SHARED = {"--device-plugin-path", "--hook-path", "--lock-dir"}
# Images the chart may use that we do not build.
EXTERNAL_IMAGES = {"kube-scheduler": "kube-scheduler"}  # container name -> repository base name
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "RuntimeClass", "PriorityClass", "Namespace",
                  "CustomResourceDefinition", "APIService", "StorageClass", "PersistentVolume"}
KNOWN_CONFIG_APIS = {"v1", "v1beta3", "v1beta2", "v1beta1"}

FAKE_CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot a real CA\n-----END CERTIFICATE-----\n").decode()


@dataclass
class Scenario:
    name: str
    why: str
    release: str = "hami"
    namespace: str = "kube-system"
    kube: str = "v1.30.0"
    sets: list = field(default_factory=list)
    values: dict = None
    expect_config_api: str = "v1"
    expect_kube_scheduler_tag: str = "v1.30.0"
    expect_ca_bundle: str = None  # None: the chart makes the certificate
    expect_client_auth: bool = True  # the extender takes only kube-scheduler's client certificate
    expect_client_secret: bool = True  # ... which the chart makes (False: an existing Secret)
    expect_cert_manager: bool = False  # cert-manager makes the extender's certificate
    values_file: str = None  # a -f file (relative to the repo); its values are checked in the render
    upstream: bool = False  # values_file is written for upstream HAMi's chart: check_upstream_values


SCENARIOS = [
    Scenario("default", "chart defaults on Kubernetes 1.30"),
    Scenario("own-cert-spread-nodeport",
             "bring-your-own TLS Secret, spread/binpack policies, NodePort Services, core limit off, legacy metrics, "
             "k3s version, CDI (cdi-cri, a driver container's root, nvidia-cdi-hook)",
             kube="v1.29.4+k3s1", expect_kube_scheduler_tag="v1.29.4", expect_ca_bundle=FAKE_CA_BUNDLE,
             expect_client_secret=False,
             sets=["scheduler.tls.existingSecret=hami-webhook-cert",
                   "scheduler.tls.caBundle=" + FAKE_CA_BUNDLE,
                   "scheduler.extender.clientAuth.existingSecret=hami-kube-scheduler-client",
                   "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy=spread",
                   "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy=binpack",
                   "scheduler.service.type=NodePort", "devicePlugin.service.type=NodePort",
                   "devicePlugin.disablecorelimit=true", "legacyMetrics=true",
                   "devicePlugin.deviceListStrategy=cdi-cri",
                   "devicePlugin.nvidiaDriverRoot=/run/nvidia/driver",
                   "devicePlugin.nvidiaHookPath=/usr/local/nvidia/toolkit/nvidia-cdi-hook"]),
    Scenario("k8s-1.20-ha-observability",
             "Kubernetes 1.20 (the e2e control plane; config API v1beta1), 3 replicas, another release/namespace, "
             "a registry, node overrides, RuntimeClass, ServiceMonitors and the dashboard ConfigMap (a -f file)",
             release="gpu", namespace="hami-system", kube="v1.20.2", expect_config_api="v1beta1",
             expect_kube_scheduler_tag="v1.20.2",
             values={"scheduler": {"replicas": 3},
                     "global": {"imageRegistry": "registry.example.com/hami", "imageTag": "0.1.0-rc1"},
                     "grafana": {"dashboards": {"enabled": True}},
                     "prometheus": {"enabled": True},
                     "devicePlugin": {"runtimeClassName": "nvidia", "createRuntimeClass": True,
                                      "nodeConfiguration": [{"name": "gpu-node-7", "devicesplitcount": 4,
                                                             "filterdevices": {"index": [3]}}]}}),
    Scenario("config-api-v1beta2",
             "a chosen KubeSchedulerConfiguration version and kube-scheduler tag on an EKS-style version, "
             "extender client certificates off",
             kube="v1.24.3-eks-abc123", expect_config_api="v1beta2", expect_kube_scheduler_tag="v1.24.17",
             expect_client_auth=False, expect_client_secret=False,
             sets=["scheduler.kubeScheduler.configApiVersion=v1beta2",
                   # The older shape of the image: a string and imageTag beside it.
                   "scheduler.kubeScheduler.image=registry.k8s.io/kube-scheduler",
                   "scheduler.kubeScheduler.imageTag=v1.24.17",
                   "scheduler.extender.clientAuth.enabled=false"]),
    Scenario("upstream-common",
             "a values file in upstream HAMi's shapes setting the commonly changed keys "
             "(deploy/helm/tests/upstream-common-values.yaml): policies, split/scaling, resource names, node config, "
             "images, pull secrets, selectors, tolerations, cert-manager",
             values_file="deploy/helm/tests/upstream-common-values.yaml", upstream=True,
             expect_kube_scheduler_tag="v1.30.2", expect_cert_manager=True),
    Scenario("external-kube-scheduler",
             "no kube-scheduler sidecar (the cluster's calls the Service), 2 replicas: the extender's own Lease",
             sets=["scheduler.kubeScheduler.enabled=false", "scheduler.replicas=2"],
             expect_config_api=None, expect_kube_scheduler_tag=None),
]


# --------------------------------------------------------------------------
# Output

class Report:
    def __init__(self, quiet=False):
        self.passed = 0
        self.failed = []
        self.quiet = quiet

    def check(self, name, problems, detail=""):
        problems = [p for p in problems if p]
        if problems:
            self.failed.append((name, problems))
            if not self.quiet:
                print(f"FAIL {name}")
                for p in problems:
                    print(f"     - {p}")
        else:
            self.passed += 1
            if not self.quiet:
                print(f"ok   {name}" + (f" ({detail})" if detail else ""))

    def messages(self):
        return [f"{n}: {p}" for n, ps in self.failed for p in ps]


class CannotRun(Exception):
    pass


def rel(ctx, path):
    try:
        return os.path.relpath(path, ctx.repo)
    except ValueError:
        return path


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------
# Facts taken from the sources

def cmake_outputs(repo):
    """Files our CMake build writes under <build>/src: {file name: target}."""
    out = {}
    files = [os.path.join(repo, "src", "CMakeLists.txt")]
    for root, _, names in os.walk(os.path.join(repo, "src")):
        files += [os.path.join(root, n) for n in names if n.endswith(".cmake")]
    for f in files:
        text = read(f)
        for m in re.finditer(r"add_executable\(\s*([\w.+-]+)", text):
            out[m.group(1)] = m.group(1)
        for m in re.finditer(r"add_library\(\s*([\w.+-]+)\s+SHARED", text):
            target = m.group(1)
            name = target
            p = re.search(r"set_target_properties\(\s*" + re.escape(target) + r"\s+PROPERTIES[^)]*?OUTPUT_NAME\s+([\w.+-]+)", text)
            if p:
                name = p.group(1)
            out[f"lib{name}.so"] = target
    return out


def executable_sources(repo):
    """{binary: its main file} from add_executable(NAME path/main.cpp) in src/CMakeLists.txt."""
    text = read(os.path.join(repo, "src", "CMakeLists.txt"))
    return {m.group(1): "src/" + m.group(2) for m in re.finditer(r"add_executable\(\s*([\w-]+)\s+([\w/.]+\.cpp)", text)}


def flags_from_source(paths):
    text = "\n".join(read(p) for p in paths)
    names = {"-h", "--help"}
    for m in re.finditer(r'(?:add_option|add_flag|set_version_flag)\(\s*"([^"]+)"', text):
        for n in m.group(1).split(","):
            n = n.strip()
            if n.startswith("-"):
                names.add(n)
    return names


def flags_from_help(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, NODE_NAME="help"))
    if p.returncode != 0:
        raise CannotRun(f"{binary} --help exited {p.returncode}: {p.stderr.strip()[:200]}")
    names = set()
    for line in p.stdout.splitlines():
        m = re.match(r"^ {2}(-{1,2}[A-Za-z][\w-]*(?:,\s*-{1,2}[A-Za-z][\w-]*)*)", line)
        if m:
            names.update(n.strip() for n in m.group(1).split(","))
    if "--help" not in names:
        raise CannotRun(f"cannot read the options in `{binary} --help`")
    return names


def metric_names(repo):
    names = set()
    for d in ("src/monitor", "src/scheduler"):
        for root, _, files in os.walk(os.path.join(repo, d)):
            for f in files:
                if not f.endswith(".cpp"):
                    continue
                text = read(os.path.join(root, f))
                names.update(re.findall(r'"(hami_[a-z0-9_]+)"', text))
                names.update(re.findall(r'(?:family|legacy_family|sample)\(\s*"([A-Za-z_:][A-Za-z0-9_:]*)"', text))
                # A histogram's series: NAME_bucket, NAME_sum, NAME_count.
                for h in re.findall(r'render_histograms\(\s*\w+,\s*"([A-Za-z_:][A-Za-z0-9_:]*)"', text):
                    names.update(h + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


def scheduler_routes(repo):
    """(METHOD, path) of every route src/scheduler/server.cpp declares (http::Route)."""
    text = read(os.path.join(repo, "src/scheduler/server.cpp"))
    return {(m.group(1).upper(), m.group(2))
            for m in re.finditer(r'\.method\s*=\s*"(\w+)",\s*\.path\s*=\s*"(/[^"]*)"', text)}


def _args_of_call(text, open_paren):
    """Top-level arguments of the call whose '(' is at open_paren."""
    depth, i, start, args = 0, open_paren, open_paren + 1, []
    quote = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return [a.strip() for a in args if a.strip()]
        elif ch == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
        i += 1
    return []


RESOURCE_RE = re.compile(r'\s*(?:hami::)?(?:k8s::)?(?:(node_path)|(pod_path)|core_path\s*\(\s*"([a-z/]+)")')
CALL_RE = re.compile(r'\b(?:client_?|\(\*client\))\s*(?:\.|->)\s*(get|list|watch|create|update|merge_patch|del|'
                     r'read_modify_patch|patch_annotations|bind_pod)\s*\(')
VERBS = {"get": ["get"], "list": ["list"], "watch": ["watch"], "create": ["create"], "update": ["update"],
         "merge_patch": ["patch"], "del": ["delete"], "read_modify_patch": ["get", "patch"]}


def scan_api_calls(repo):
    """(component, group, resource, verb) -> ["file:line", ...] found in the code, and
    the call sites the scanner could not resolve."""
    found, unresolved = {}, []

    def add(comp, group, res, verb, where):
        found.setdefault((comp, group, res, verb), []).append(where)

    lease_text = read(os.path.join(repo, "src/k8s/leader_election.cpp"))
    lease_verbs = sorted({{"get_lease": "get", "create_lease": "create", "update_lease": "update"}[m]
                          for m in re.findall(r"\b(get_lease|create_lease|update_lease)\s*\(", lease_text)})
    for comp, dirs in SOURCE_DIRS.items():
        for d in dirs:
            for root, _, files in os.walk(os.path.join(repo, d)):
                for f in sorted(files):
                    if not f.endswith((".cpp", ".hpp")):
                        continue
                    path = os.path.join(root, f)
                    text = read(path)
                    code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)

                    def where(pos):
                        return f"{os.path.relpath(path, repo)}:{code.count(chr(10), 0, pos) + 1}"

                    for m in CALL_RE.finditer(code):
                        method = m.group(1)
                        args = _args_of_call(code, m.end() - 1)
                        if method == "bind_pod":
                            add(comp, "", "pods/binding", "create", where(m.start()))
                            continue
                        r = RESOURCE_RE.match(args[0]) if args else None
                        if not r:
                            unresolved.append(f"{where(m.start())}: {method}({args[0] if args else ''}...)")
                            continue
                        res = "nodes" if r.group(1) else "pods" if r.group(2) else r.group(3)
                        if method == "patch_annotations":
                            verbs = ["get", "patch"] if len(args) >= 3 else ["patch"]
                        else:
                            verbs = VERBS[method]
                        for v in verbs:
                            add(comp, "", res, v, where(m.start()))
                    # A Reflector constructed in place, or emplaced into an
                    # optional declared as one (std::optional<k8s::Reflector> x;
                    # x.emplace(client, path, ...)).
                    later = re.findall(r"optional<\s*(?:k8s::)?Reflector\s*>\s+(\w+)\s*;", code)
                    pattern = r"\bReflector\s+\w+\s*\("
                    if later:
                        pattern += r"|\b(?:" + "|".join(later) + r")\.emplace\s*\("
                    for m in re.finditer(pattern, code):
                        args = _args_of_call(code, m.end() - 1)
                        r = RESOURCE_RE.match(args[1]) if len(args) > 1 else None
                        if not r:
                            unresolved.append(f"{where(m.start())}: Reflector({', '.join(args[:2])}...)")
                            continue
                        res = "nodes" if r.group(1) else "pods" if r.group(2) else r.group(3)
                        for v in ("list", "watch"):
                            add(comp, "", res, v, where(m.start()))
                    for m in re.finditer(r"\b(?:LeaderElector\b|elector\.emplace\s*\()", code):
                        for v in lease_verbs:
                            add(comp, LEASE_CALL[0], LEASE_CALL[1], v, where(m.start()))
    return found, unresolved


# --------------------------------------------------------------------------
# Dockerfiles

@dataclass
class Image:
    title: str
    dockerfile: str
    files: dict  # path in the image -> where it comes from
    runtime_packages: list
    build_outputs: list  # (path under the build dir, dest)


def dockerfile_lines(path):
    lines, cur = [], ""
    for raw in read(path).splitlines():
        s = raw.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        lines.append(cur.strip())
        cur = ""
    if cur.strip():
        lines.append(cur.strip())
    return lines


def dockerignore_patterns(path):
    if not os.path.exists(path):
        return []
    pats = []
    for l in read(path).splitlines():
        l = l.strip()
        if l and not l.startswith("#"):
            pats.append(l.rstrip("/").lstrip("/"))
    return pats


def dockerignored(relpath, pats):
    parts = relpath.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        for p in pats:
            neg = p.startswith("!")
            if not neg and (fnmatch.fnmatchcase(prefix, p) or
                            (p.startswith("**/") and fnmatch.fnmatchcase(prefix.split("/")[-1], p[3:]))):
                return p
    return None


def check_dockerfiles(ctx, report):
    """Parses every *Dockerfile under the docker dir; returns {title: Image}."""
    images, problems = {}, []
    outputs = cmake_outputs(ctx.repo)
    pats = dockerignore_patterns(ctx.dockerignore)
    files = sorted(f for f in os.listdir(ctx.docker_dir) if f.endswith("Dockerfile") or f.startswith("Dockerfile"))
    if not files:
        report.check("Dockerfiles", [f"no Dockerfile in {rel(ctx, ctx.docker_dir)}"])
        return images
    for name in files:
        path = os.path.join(ctx.docker_dir, name)
        shown = rel(ctx, path)
        stages, cur = [], None
        for line in dockerfile_lines(path):
            word, _, rest = line.partition(" ")
            word = word.upper()
            if word == "FROM":
                m = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
                cur = {"base": m.group(1), "name": m.group(2), "workdir": "/", "copies": [], "runs": [], "labels": {}}
                stages.append(cur)
            elif cur is None:
                continue
            elif word == "WORKDIR":
                cur["workdir"] = os.path.join(cur["workdir"], rest.strip())
            elif word == "RUN":
                cur["runs"].append(rest)
            elif word == "LABEL":
                for k, v in re.findall(r'([\w.-]+)=("(?:[^"\\]|\\.)*"|\S+)', rest):
                    cur["labels"][k] = v.strip('"')
            elif word in ("COPY", "ADD"):
                if word == "ADD":
                    problems.append(f"{shown}: use COPY, not ADD ({line})")
                toks = rest.split()
                opts = [t for t in toks if t.startswith("--")]
                args = [t for t in toks if not t.startswith("--")]
                if rest.lstrip().startswith("["):
                    problems.append(f"{shown}: JSON-form COPY is not checked; use the plain form ({line})")
                    continue
                src_stage = next((o.split("=", 1)[1] for o in opts if o.startswith("--from=")), None)
                cur["copies"].append((src_stage, args[:-1], args[-1]))
        if not stages:
            problems.append(f"{shown}: no FROM")
            continue
        for st in stages:
            if not re.match(r"(\$\{?DEBIAN_IMAGE\}?|debian:bookworm)", st["base"]):
                problems.append(f"{shown}: stage FROM {st['base']}: use the Debian bookworm base (ARG DEBIAN_IMAGE=debian:bookworm-slim)")
        argm = re.search(r"ARG\s+DEBIAN_IMAGE=(\S+)", read(path))
        if argm and not argm.group(1).startswith("debian:bookworm"):
            problems.append(f"{shown}: DEBIAN_IMAGE defaults to {argm.group(1)}, not debian:bookworm*")
        by_name = {s["name"]: s for s in stages if s["name"]}
        final = stages[-1]
        title = final["labels"].get("org.opencontainers.image.title")
        if not title:
            problems.append(f"{shown}: the final stage has no LABEL org.opencontainers.image.title (the image name the chart uses)")
            continue
        img = Image(title, shown, {}, [], [])
        for stage in stages:
            for src_stage, srcs, dest in stage["copies"]:
                for s in srcs:
                    if src_stage is None:
                        full = os.path.join(ctx.repo, s)
                        if not os.path.exists(full):
                            problems.append(f"{shown}: COPY {s}: no such file or directory in the repository")
                        elif dockerignored(s, pats):
                            problems.append(f"{shown}: COPY {s}: excluded from the build context by .dockerignore pattern '{dockerignored(s, pats)}'")
                        origin = s
                    else:
                        bs = by_name.get(src_stage)
                        if bs is None:
                            problems.append(f"{shown}: COPY --from={src_stage}: no such stage")
                            continue
                        build_root = os.path.join(bs["workdir"], "build", "release") + "/"
                        if not s.startswith(build_root):
                            problems.append(f"{shown}: COPY --from={src_stage} {s}: not under the release preset's build directory {build_root}")
                            continue
                        relout = s[len(build_root):]
                        fname = os.path.basename(relout)
                        target = outputs.get(fname)
                        if not relout.startswith("src/") or target is None:
                            problems.append(f"{shown}: COPY --from={src_stage} {s}: not a file our CMake build makes (known: {', '.join(sorted(outputs))})")
                            continue
                        built = " ".join(bs["runs"])
                        tm = re.findall(r"--target\s+((?:[\w.-]+\s*)+)", built)
                        targets = set(" ".join(tm).split())
                        if tm and target not in targets:
                            problems.append(f"{shown}: COPY {s}: its target {target} is not in the stage's `cmake --build --target` list")
                        if "cmake --preset release" not in built:
                            problems.append(f"{shown}: stage {src_stage} does not run `cmake --preset release`")
                        origin = f"build:{relout}"
                        if stage is final:
                            img.build_outputs.append((relout, dest))
                    if stage is final:
                        d = dest.rstrip("/") + "/" + os.path.basename(s) if dest.endswith("/") else dest
                        img.files[d] = origin
        for r in final["runs"]:
            if "apt-get install" in r:
                after = r.split("apt-get install", 1)[1].split("&&")[0]
                img.runtime_packages += [t for t in after.split() if not t.startswith("-")]
        if title in images:
            problems.append(f"{shown}: image {title} is also built by {images[title].dockerfile}")
        images[title] = img
    report.check("Dockerfiles: bookworm stages, COPY sources exist (and are in the build context), build outputs are CMake targets",
                 problems, ", ".join(f"{t} <- {i.dockerfile}" for t, i in sorted(images.items())))
    return images


def packages_of(paths):
    """{library path: Debian package} in one dpkg -S call (merged /usr: /lib is /usr/lib)."""
    cands = {}
    for p in paths:
        for c in {p, os.path.realpath(p), ("/usr" + p) if p.startswith("/lib") else p}:
            cands.setdefault(c, p)
    out = subprocess.run(["dpkg", "-S"] + sorted(cands), capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        pkgs, _, path = line.partition(": ")
        if path in cands:
            found.setdefault(cands[path], pkgs.split(",")[0].split(":")[0].strip())
    return found


def check_runtime_libraries(ctx, images, report):
    """The runtime stage's packages give every shared library the binaries link."""
    if not ctx.build_dir or not shutil.which("ldd") or not shutil.which("apt-cache"):
        print("skip runtime libraries of the images: no build directory with the binaries (or no ldd/apt-cache)")
        return
    problems, checked = [], 0
    for title, img in sorted(images.items()):
        bins = [(relout, os.path.join(ctx.build_dir, relout)) for relout, _ in img.build_outputs]
        bins = [(r, p) for r, p in bins if os.path.exists(p)]
        if not bins:
            continue
        p = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                            "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + img.runtime_packages,
                           capture_output=True, text=True)
        if p.returncode != 0 or not p.stdout.strip():
            print(f"skip runtime libraries of {title}: apt-cache knows none of {' '.join(img.runtime_packages)} (run apt-get update)")
            continue
        closure = set()
        for line in p.stdout.splitlines():
            if not line.startswith(" "):
                closure.add(line.strip().split(":")[0])
            else:
                m = re.match(r"\s*\|?(?:Pre)?Depends:\s*<?([\w.+-]+)", line)
                if m:
                    closure.add(m.group(1))
        needs = []
        for relout, path in bins:
            out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
            for lib, resolved in re.findall(r"^\s*(\S+)\s+=>\s+(\S+)", out, re.M):
                if resolved == "not":
                    problems.append(f"{title}: {relout} links {lib}, which is not found on this machine")
                else:
                    needs.append((relout, lib, resolved))
            checked += 1
        pkg_of = packages_of({r for _, _, r in needs})
        pkgs = sorted(set(pkg_of.values()))
        base = set()
        if pkgs:
            q = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Priority} ${Essential}\n"] + pkgs,
                               capture_output=True, text=True).stdout
            base = {l.split()[0] for l in q.splitlines() if " required" in l or l.endswith(" yes")}
        for relout, lib, resolved in needs:
            pkg = pkg_of.get(resolved)
            if pkg is None or pkg in closure or pkg in base:
                continue
            problems.append(f"{title} ({img.dockerfile}): {relout} needs {lib} from package {pkg}, "
                            "which the runtime stage does not install: add it to its apt-get install")
    report.check("images: runtime stages install every shared library the binaries link", problems,
                 f"{checked} binaries from {rel(ctx, ctx.build_dir)}")


# --------------------------------------------------------------------------
# Dashboard

PROMQL_FUNCS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes", "clamp",
    "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "day_of_month", "day_of_week",
    "delta", "deriv", "exp", "floor", "group", "histogram_quantile", "holt_winters", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "max",
    "max_over_time", "min", "min_over_time", "minute", "month", "predict_linear", "quantile",
    "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev",
    "stddev_over_time", "stdvar", "sum", "sum_over_time", "time", "timestamp", "topk", "vector", "year",
}
PROMQL_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                   "bool", "offset", "inf", "nan"}


def promql_metrics(expr):
    """(metric names, unknown functions) in a PromQL expression."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)
    metrics, unknown = set(), set()
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", e):
        name, call = m.group(1), m.group(2)
        if call:
            if name not in PROMQL_FUNCS:
                unknown.add(name)
        elif name.lower() not in PROMQL_KEYWORDS:
            metrics.add(name)
    return metrics, unknown


def check_dashboard(ctx, report, known_metrics):
    problems = []
    try:
        dash = json.loads(read(ctx.dashboard))
    except (OSError, ValueError) as e:
        report.check("Grafana dashboard: valid JSON", [f"{rel(ctx, ctx.dashboard)}: {e}"])
        return
    sv = dash.get("schemaVersion")
    if not isinstance(sv, int) or sv < 36:
        problems.append(f"schemaVersion {sv!r}: expected 36 or later (Grafana 9+; we write 39)")
    variables = dash.get("templating", {}).get("list", [])
    ds = [v for v in variables if v.get("type") == "datasource" and v.get("query") == "prometheus"]
    if not ds:
        problems.append("no Prometheus datasource variable (templating: type datasource, query prometheus)")
    ds_names = {"${%s}" % v["name"] for v in ds} | {"$%s" % v["name"] for v in ds}
    panels, stack = [], list(dash.get("panels", []))
    while stack:
        p = stack.pop(0)
        panels.append(p)
        stack += p.get("panels", [])
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    used, exprs = set(), 0
    for v in variables:
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and isinstance(q, str):
            for name in re.findall(r"label_values\(\s*([A-Za-z_:][\w:]*)", q):
                used.add(name)
                if name not in known_metrics:
                    problems.append(f"variable {v.get('name')}: metric {name} is not exported by our code")
    for p in panels:
        if p.get("type") == "row":
            continue
        title = p.get("title", "?")
        if "gridPos" not in p:
            problems.append(f"panel '{title}': no gridPos")
        if (p.get("datasource") or {}).get("uid") not in ds_names:
            problems.append(f"panel '{title}': datasource is not the ${{datasource}} variable")
        if not p.get("targets"):
            problems.append(f"panel '{title}': no queries")
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            if not expr:
                problems.append(f"panel '{title}': a target without expr")
                continue
            exprs += 1
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                problems.append(f"panel '{title}': unbalanced brackets in {expr}")
            metrics, unknown = promql_metrics(expr)
            for f in sorted(unknown):
                problems.append(f"panel '{title}': {f}() is not a PromQL function")
            for name in sorted(metrics):
                used.add(name)
                if name not in known_metrics:
                    problems.append(f"panel '{title}': metric {name} is not exported by our code "
                                    "(src/monitor/metrics.cpp, src/scheduler/metrics.cpp)")
    chart_copy = os.path.join(ctx.chart, "dashboards", "hami-dashboard.json")
    if not os.path.exists(chart_copy):
        problems.append(f"{rel(ctx, chart_copy)} is missing (a link to {rel(ctx, ctx.dashboard)})")
    elif read(chart_copy) != read(ctx.dashboard):
        problems.append(f"{rel(ctx, chart_copy)} differs from {rel(ctx, ctx.dashboard)}: make it a link "
                        "(ln -sf ../../../grafana/hami-dashboard.json)")
    report.check("Grafana dashboard: JSON, datasource variable, every metric in its PromQL is one our code exports",
                 problems, f"{len(panels)} panels, {exprs} queries, {len(used)} metrics, all among {len(known_metrics)} exported")


# --------------------------------------------------------------------------
# Rendering

def helm_noise(text):
    """Helm's stderr without its INFO lines (the dashboard link it follows)."""
    return "\n".join(l for l in text.splitlines() if not l.startswith("level=INFO")).strip()


def render(ctx, sc, chart=None):
    """Returns (manifest text, notes text) from real Helm: `helm template` for the manifests (with
    the scenario's Kubernetes version), `helm lint --strict` for Helm's strict engine (a missing
    key is an error, a lint warning fails) and `helm install --dry-run=client -o json` for NOTES
    (`helm template` renders none). Raises CannotRun with the failing command's error."""
    values = []
    for s in sc.sets:
        values += ["--set", s]
    if sc.values_file:
        values += ["-f", os.path.join(ctx.repo, sc.values_file)]
    if sc.values:
        vf = os.path.join(ctx.work, f"values-{sc.name}.yaml")
        with open(vf, "w") as f:
            yaml.safe_dump(sc.values, f)
        values += ["-f", vf]
    chart = chart or ctx.chart
    ns = ["--namespace", sc.namespace]
    env = dict(os.environ, HELM_CACHE_HOME=os.path.join(ctx.work, ".helm"),
               HELM_CONFIG_HOME=os.path.join(ctx.work, ".helm"), HELM_DATA_HOME=os.path.join(ctx.work, ".helm"))
    env.pop("KUBECONFIG", None)

    def start(what, args):
        return what, subprocess.Popen([ctx.helm] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env)

    def finish(job):
        what, p = job
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            raise CannotRun(f"{what}: no answer in 120 s")
        if p.returncode != 0:
            raise CannotRun(f"{what}: {helm_noise(err) or helm_noise(out) or f'exit {p.returncode}'}")
        return out

    text = finish(start("helm template", ["template", sc.release, chart, "--kube-version", sc.kube] + ns + values))
    lint = start("helm lint --strict", ["lint", "--strict", "--quiet", chart, "--kube-version", sc.kube] + ns + values)
    install = start("helm install --dry-run=client",
                    ["install", sc.release, chart, "--dry-run=client", "-o", "json"] + ns + values)
    finish(lint)
    try:
        notes = json.loads(finish(install))["info"].get("notes", "")
    except (ValueError, KeyError, TypeError) as e:
        raise CannotRun(f"helm install --dry-run=client -o json: no info.notes in its answer ({e})")
    return text, notes


def split_docs(text):
    docs = []
    for chunk in re.split(r"(?m)^---\s*$", text):
        if not chunk.strip():
            continue
        m = re.search(r"(?m)^# Source: (\S+)", chunk)
        docs.append((m.group(1) if m else "?", chunk))
    return docs


# --------------------------------------------------------------------------
# Checks of one rendered scenario

def workloads(objs):
    for src, o in objs:
        if o.get("kind") in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            yield src, o, o["spec"]["template"]["spec"]


def all_containers(spec):
    for c in spec.get("initContainers") or []:
        yield "init", c
    for c in spec.get("containers") or []:
        yield "main", c


def component_of(c):
    cmd = c.get("command") or []
    base = os.path.basename(cmd[0]) if cmd else ""
    if base in BINARIES:
        return base
    if base == "vgpu-init.sh":
        return "vgpu-init"
    if c.get("name") == "kube-scheduler" and base == "kube-scheduler":
        return "kube-scheduler"
    return None


def args_of(c):
    return list((c.get("command") or [])[1:]) + list(c.get("args") or [])


def flag_values(args):
    out = {}
    for a in args:
        if a.startswith("-"):
            name, eq, val = a.partition("=")
            out.setdefault(name, []).append(val if eq else None)
    return out


def one(flags, name):
    v = flags.get(name)
    return v[-1] if v else None


def mount_for(c, path):
    """The volumeMount of container c that holds path (deepest first)."""
    best = None
    for m in c.get("volumeMounts") or []:
        mp = m["mountPath"].rstrip("/") or "/"
        if path.rstrip("/") == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"].rstrip("/")):
                best = m
    return best


def volume(spec, name):
    return next((v for v in spec.get("volumes") or [] if v["name"] == name), None)


def strings_only(where, mapping, problems):
    for k, v in (mapping or {}).items():
        if not isinstance(v, str):
            problems.append(f"{where}: {k}: {v!r} is a {type(v).__name__}, not a string (quote it)")


def tls_subject_names(crt_b64):
    if not shutil.which("openssl"):
        return None
    pem = base64.b64decode(crt_b64)
    p = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input=pem, capture_output=True)
    if p.returncode != 0:
        return None
    return set(re.findall(r"DNS:([^,\s]+)", p.stdout.decode()))


def tls_extended_key_usage(crt_b64):
    if not shutil.which("openssl"):
        return None
    p = subprocess.run(["openssl", "x509", "-noout", "-ext", "extendedKeyUsage"], input=base64.b64decode(crt_b64),
                       capture_output=True)
    if p.returncode != 0:
        return None
    return p.stdout.decode()


def verify_chain(ca_b64, crt_b64, work):
    if not shutil.which("openssl"):
        return None
    ca, crt = os.path.join(work, "ca.pem"), os.path.join(work, "crt.pem")
    with open(ca, "wb") as f:
        f.write(base64.b64decode(ca_b64))
    with open(crt, "wb") as f:
        f.write(base64.b64decode(crt_b64))
    p = subprocess.run(["openssl", "verify", "-CAfile", ca, crt], capture_output=True, text=True)
    return p.returncode == 0


def check_scenario(ctx, sc, report, facts, images, chart=None):
    name = f"[{sc.name}]"
    try:
        text, notes = render(ctx, sc, chart)
    except CannotRun as e:
        report.check(f"{name} renders", [str(e)])
        return None
    out = os.path.join(ctx.work, f"rendered-{sc.name}.yaml")
    with open(out, "w") as f:
        f.write(text)

    # Documents.
    problems, objs, seen = [], [], {}
    for src, chunk in split_docs(text):
        try:
            o = yaml.safe_load(chunk)
        except yaml.YAMLError as e:
            problems.append(f"{src}: not YAML: {e}")
            continue
        if not isinstance(o, dict):
            problems.append(f"{src}: a document that is not a mapping")
            continue
        md = o.get("metadata") or {}
        for k in ("apiVersion", "kind"):
            if not isinstance(o.get(k), str) or not o.get(k):
                problems.append(f"{src}: no {k}")
        nm = md.get("name")
        if not isinstance(nm, str) or not re.fullmatch(r"[a-z0-9]([a-z0-9.:-]{0,251}[a-z0-9])?", nm or ""):
            problems.append(f"{src}: {o.get('kind')}: metadata.name {nm!r} is not a valid name")
        if o.get("kind") not in CLUSTER_SCOPED and not md.get("namespace"):
            problems.append(f"{src}: {o.get('kind')} {nm}: namespaced but has no metadata.namespace")
        key = (o.get("kind"), md.get("namespace"), nm)
        if key in seen:
            problems.append(f"{src}: {key} is also defined in {seen[key]}")
        seen[key] = src
        strings_only(f"{src}: {o.get('kind')} {nm} labels", md.get("labels"), problems)
        strings_only(f"{src}: {o.get('kind')} {nm} annotations", md.get("annotations"), problems)
        objs.append((src, o))
    for src, o, spec in workloads(objs):
        strings_only(f"{src}: pod labels", o["spec"]["template"]["metadata"].get("labels"), problems)
        strings_only(f"{src}: nodeSelector", spec.get("nodeSelector"), problems)
        strings_only(f"{src}: selector", o["spec"]["selector"].get("matchLabels"), problems)
    if not notes.strip():
        problems.append("NOTES.txt rendered empty")
    report.check(f"{name} renders; every document is YAML with apiVersion, kind, metadata.name (+namespace)",
                 problems, f"{len(objs)} objects, {sc.why}")
    if not objs:
        return None

    # yamllint, on the manifests and the YAML files they carry.
    lint_files = [out]
    for src, o in objs:
        if o["kind"] == "ConfigMap":
            for k, v in (o.get("data") or {}).items():
                if k.endswith((".yaml", ".yml")):
                    p = os.path.join(ctx.work, f"{sc.name}-{o['metadata']['name']}-{k}")
                    with open(p, "w") as f:
                        f.write(v if v.endswith("\n") else v + "\n")
                    lint_files.append(p)
    p = subprocess.run(["yamllint", "-f", "parsable", "-c", ctx.yamllint_config] + lint_files,
                       capture_output=True, text=True)
    errors = [l for l in p.stdout.splitlines() if "[error]" in l]
    warnings = [l for l in p.stdout.splitlines() if "[warning]" in l]
    if p.returncode != 0 and not errors:
        errors = [p.stderr.strip() or p.stdout.strip() or f"yamllint exited {p.returncode}"]
    report.check(f"{name} yamllint ({rel(ctx, ctx.yamllint_config)})",
                 [e.replace(ctx.work + "/", "") for e in errors],
                 f"{len(lint_files)} files, {len(warnings)} warnings")

    by_kind = {}
    for src, o in objs:
        by_kind.setdefault(o["kind"], []).append(o)

    def find(kind, nm, ns=None):
        return next((o for o in by_kind.get(kind, []) if o["metadata"]["name"] == nm and
                     (ns is None or o["metadata"].get("namespace") == ns)), None)

    # Containers: images, commands, flags, mounts.
    img_problems, flag_problems, mount_problems = [], [], []
    containers_by_comp = {}
    for src, o, spec in workloads(objs):
        wl = f"{o['kind']} {o['metadata']['name']}"
        for phase, c in all_containers(spec):
            comp = component_of(c)
            image = c.get("image", "")
            m = re.match(r"^(?:(.+)/)?([^/:@]+)(?::([^@]+))?(?:@.+)?$", image)
            repo_base, tag = (m.group(2), m.group(3)) if m else (None, None)
            cname = c.get("name")
            if comp is None:
                img_problems.append(f"{wl}: container {cname} runs {c.get('command')}, which is neither one of our "
                                    f"binaries ({', '.join(BINARIES)}) nor kube-scheduler")
                continue
            containers_by_comp.setdefault(comp, []).append((o, spec, c))
            if not tag:
                img_problems.append(f"{wl}: container {cname}: image {image!r} has no tag")
            if comp == "kube-scheduler":
                if repo_base != EXTERNAL_IMAGES["kube-scheduler"]:
                    img_problems.append(f"{wl}: container {cname}: image {image} is not kube-scheduler")
                if sc.expect_kube_scheduler_tag and tag != sc.expect_kube_scheduler_tag:
                    img_problems.append(f"{wl}: kube-scheduler image tag {tag}, expected {sc.expect_kube_scheduler_tag} "
                                        f"for Kubernetes {sc.kube}")
                continue
            img = images.get(repo_base)
            if img is None:
                img_problems.append(f"{wl}: container {cname}: image {image} is not built by any Dockerfile in "
                                    f"{rel(ctx, ctx.docker_dir)} (their images: {', '.join(sorted(images)) or 'none'})")
                continue
            cmd0 = (c.get("command") or [""])[0]
            if cmd0 not in img.files:
                img_problems.append(f"{wl}: container {cname} runs {cmd0}, which {img.dockerfile} does not put in "
                                    f"image {img.title} (it has {', '.join(sorted(img.files))})")
            if comp not in BINARIES:
                continue
            # Flags.
            args = args_of(c)
            accepted, source = facts["flags"][comp]
            for a in args:
                if not a.startswith("-"):
                    flag_problems.append(f"{wl}: {comp}: argument {a!r} is not a --flag=value (our binaries take none)")
                    continue
                fname = a.split("=", 1)[0]
                if fname not in accepted:
                    flag_problems.append(f"{wl}: {comp} is given {fname}, which it does not accept ({source})")
            binary = facts["binaries"].get(comp)
            if binary:
                p = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True, timeout=20,
                                   env=dict(os.environ, NODE_NAME="check"))
                if p.returncode != 0:
                    err = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[0]
                    flag_problems.append(f"{wl}: {comp} refuses its arguments: {err} (`{rel(ctx, binary)} "
                                         f"{' '.join(args)} --help` exits {p.returncode})")
            # Paths the flags name are mounted.
            fl = flag_values(args)
            for pf in PATH_FLAGS.get(comp, []):
                val = one(fl, pf)
                if val is None:
                    continue
                path = val.rstrip("/") + "/vgpu" if (comp == "hami-device-plugin" and pf == "--hook-path") else val
                mnt = mount_for(c, path)
                if mnt is None:
                    mount_problems.append(f"{wl}: {comp} {pf}={val}: {path} is not mounted in container {cname}")
                    continue
                if pf in HOST_SHARED:
                    vol = volume(spec, mnt["name"])
                    hp = (vol or {}).get("hostPath", {}).get("path", "").rstrip("/")
                    if not vol or "hostPath" not in vol or hp != mnt["mountPath"].rstrip("/"):
                        mount_problems.append(f"{wl}: {comp} {pf}={val}: must be a hostPath mounted at the same path "
                                              f"(host paths are handed to kubelet), got volume {vol}")
    report.check(f"{name} every image is built by a Dockerfile and holds the command the chart runs",
                 img_problems)
    report.check(f"{name} every flag given to our binaries is one they accept"
                 + (" and the values parse" if facts["binaries"] else ""), flag_problems,
                 "; ".join(sorted({f"{c}: {facts['flags'][c][1]}" for c in containers_by_comp if c in BINARIES})))

    # Device plugin + node agent wiring.
    dp = containers_by_comp.get("hami-device-plugin", [])
    agents = containers_by_comp.get("hami-node-agent", [])
    inits = containers_by_comp.get("vgpu-init", [])
    if not dp or not agents:
        mount_problems.append("no hami-device-plugin or hami-node-agent container")
    for o, spec, c in dp:
        hook = one(flag_values(args_of(c)), "--hook-path") or "/usr/local"
        vgpu = hook.rstrip("/") + "/vgpu"
        same = [ac for ao, _, ac in agents if ao is o]
        for ac in same:
            ah = one(flag_values(args_of(ac)), "--hook-path") or "/usr/local/vgpu"
            if ah.rstrip("/") != vgpu:
                mount_problems.append(f"node agent --hook-path={ah} but the device plugin writes {vgpu}")
        if not same:
            mount_problems.append(f"{o['kind']} {o['metadata']['name']}: no node agent beside the device plugin")
        if not spec.get("hostPID"):
            mount_problems.append(f"{o['kind']} {o['metadata']['name']}: hostPID is not true (the node agent maps host PIDs from /proc)")
        ic = [ic for io, _, ic in inits if io is o]
        if not ic:
            mount_problems.append(f"{o['kind']} {o['metadata']['name']}: no init container installs libvgpu.so")
        for i in ic:
            target = (i.get("command") or [None, None])[1:2]
            target = target[0] if target else None
            if (target or "").rstrip("/") != vgpu:
                mount_problems.append(f"vgpu-init installs into {target}, but Allocate mounts {vgpu}/libvgpu.so")
            mnt = mount_for(i, vgpu)
            vol = volume(spec, mnt["name"]) if mnt else None
            if not vol or (vol.get("hostPath") or {}).get("path", "").rstrip("/") != vgpu:
                mount_problems.append(f"vgpu-init: {vgpu} is not the host's {vgpu}")
        if sc.name == "default" and spec.get("nodeSelector") != {"gpu": "on"}:
            mount_problems.append(f"default nodeSelector is {spec.get('nodeSelector')}, expected gpu: \"on\" (as upstream)")
    report.check(f"{name} paths the flags name are mounted; plugin, agent and vgpu-init share <gpuHookPath>/vgpu on the host",
                 mount_problems)

    # Services select pods and name their ports.
    svc_problems = []
    pods = [(o, spec, o["spec"]["template"]["metadata"].get("labels") or {}) for _, o, spec in workloads(objs)]
    for svc in by_kind.get("Service", []):
        sel = svc["spec"].get("selector") or {}
        match = [(o, spec) for o, spec, labels in pods if sel and all(labels.get(k) == v for k, v in sel.items())]
        if not match:
            svc_problems.append(f"Service {svc['metadata']['name']}: selector {sel} matches no pod template")
            continue
        for port in svc["spec"].get("ports", []):
            tp = port.get("targetPort", port.get("port"))
            ok = any(any((isinstance(tp, str) and cp.get("name") == tp) or cp.get("containerPort") == tp
                         for _, c in all_containers(spec) for cp in c.get("ports") or [])
                     for _, spec in match)
            if not ok:
                svc_problems.append(f"Service {svc['metadata']['name']} port {port.get('name')}: targetPort {tp} is no container port")
            if svc["spec"].get("type") == "NodePort" and not (30000 <= int(port.get("nodePort", 0)) <= 32767):
                svc_problems.append(f"Service {svc['metadata']['name']} port {port.get('name')}: nodePort {port.get('nodePort')} not in 30000-32767")
    report.check(f"{name} Services select the pods and their targetPorts exist", svc_problems)

    # The extender, as kube-scheduler and the API server reach it.
    ext_problems = []
    routes = facts["routes"]
    ext = containers_by_comp.get("hami-scheduler", [])
    if len(ext) != 1:
        report.check(f"{name} extender/webhook wiring", [f"expected one hami-scheduler container, found {len(ext)}"])
        return objs
    eo, espec, ec = ext[0]
    ef = flag_values(args_of(ec))
    bind = one(ef, "--http_bind") or one(ef, "--http-bind") or "127.0.0.1:8080"
    bind_port = int(bind.rsplit(":", 1)[1])
    https = bool(one(ef, "--cert_file") or one(ef, "--cert-file")) and bool(one(ef, "--key_file") or one(ef, "--key-file"))
    if bind.rsplit(":", 1)[0] in ("127.0.0.1", "localhost"):
        ext_problems.append(f"--http_bind={bind}: the webhook Service cannot reach a loopback address")
    cports = {p.get("name"): p["containerPort"] for p in ec.get("ports") or []}
    if bind_port not in cports.values():
        ext_problems.append(f"--http_bind port {bind_port} is not a containerPort of the extender ({cports})")
    sched_name = one(ef, "--scheduler-name") or "hami-scheduler"
    ext_lease = one(ef, "--leader-elect-resource-name") or "hami-scheduler"
    ext_elects = "--leader-elect" in ef
    ks = containers_by_comp.get("kube-scheduler", [])
    ks_cfg = None
    replicas = int(eo["spec"].get("replicas", 1))
    if ks:
        ko, kspec, kc = ks[0]
        if ko is not eo:
            ext_problems.append("kube-scheduler is not in the extender's pod, but the extender URL is 127.0.0.1")
        cfg_path = one(flag_values(args_of(kc)), "--config")
        mnt = mount_for(kc, cfg_path or "/nonexistent")
        vol = volume(kspec, mnt["name"]) if mnt else None
        cm = find("ConfigMap", vol["configMap"]["name"], eo["metadata"]["namespace"]) if vol and "configMap" in vol else None
        key = os.path.relpath(cfg_path, mnt["mountPath"]) if mnt else None
        if not cm or key not in (cm.get("data") or {}):
            ext_problems.append(f"kube-scheduler --config={cfg_path} is not a key of a rendered ConfigMap mounted there")
        else:
            ks_cfg = yaml.safe_load(cm["data"][key])
    elif sc.expect_config_api:
        ext_problems.append("no kube-scheduler container")
    if ks_cfg is not None:
        api = ks_cfg.get("apiVersion", "")
        want = f"kubescheduler.config.k8s.io/{sc.expect_config_api}"
        if api != want:
            ext_problems.append(f"KubeSchedulerConfiguration apiVersion {api}, expected {want} for Kubernetes {sc.kube}")
        if ks_cfg.get("kind") != "KubeSchedulerConfiguration":
            ext_problems.append(f"kind {ks_cfg.get('kind')}, expected KubeSchedulerConfiguration")
        profiles = [p.get("schedulerName") for p in ks_cfg.get("profiles") or []]
        if sched_name not in profiles:
            ext_problems.append(f"no kube-scheduler profile named {sched_name} (the webhook's --scheduler-name); profiles: {profiles}")
        exts = ks_cfg.get("extenders") or []
        if len(exts) != 1:
            ext_problems.append(f"{len(exts)} extenders configured, expected 1")
        for x in exts:
            m = re.match(r"^(https?)://([^:/]+):(\d+)(/.*)?$", x.get("urlPrefix", ""))
            if not m:
                ext_problems.append(f"urlPrefix {x.get('urlPrefix')!r} is not scheme://host:port")
                continue
            scheme, host, port, prefix = m.group(1), m.group(2), int(m.group(3)), m.group(4) or ""
            if host != "127.0.0.1":
                ext_problems.append(f"urlPrefix host {host}: the extender is in the same pod (127.0.0.1)")
            if port != bind_port:
                ext_problems.append(f"urlPrefix port {port} but the extender listens on {bind_port} (--http_bind={bind})")
            if (scheme == "https") != bool(x.get("enableHTTPS")):
                ext_problems.append(f"urlPrefix scheme {scheme} but enableHTTPS is {x.get('enableHTTPS')}")
            if (scheme == "https") != https:
                ext_problems.append(f"urlPrefix scheme {scheme} but the extender {'serves' if https else 'does not serve'} "
                                    "HTTPS (--cert_file and --key_file)")
            for verb in ("filterVerb", "prioritizeVerb", "bindVerb"):
                v = x.get(verb)
                if not v:
                    ext_problems.append(f"{verb} is not set (our extender answers filter, prioritize and bind)")
                elif ("POST", f"{prefix}/{v}") not in routes:
                    ext_problems.append(f"{verb}: {v}: the extender has no route POST {prefix}/{v} (src/scheduler/server.cpp)")
            if not x.get("nodeCacheCapable"):
                ext_problems.append("nodeCacheCapable is not true (the extender answers with NodeNames from its cache)")
            tls = x.get("tlsConfig") or {}
            if scheme == "https" and not tls:
                ext_problems.append("https without tlsConfig: kube-scheduler cannot trust the extender's certificate")
            if tls.get("caFile"):
                m2 = mount_for(kc, tls["caFile"])
                v2 = volume(kspec, m2["name"]) if m2 else None
                keys = [i["path"] for i in (v2 or {}).get("secret", {}).get("items", [])] if v2 else []
                if not v2 or "secret" not in v2 or (keys and os.path.basename(tls["caFile"]) not in keys):
                    ext_problems.append(f"tlsConfig.caFile {tls['caFile']} is not mounted from the TLS Secret in kube-scheduler")
            if tls.get("caData"):
                try:
                    base64.b64decode(tls["caData"], validate=True)
                except ValueError:
                    ext_problems.append("tlsConfig.caData is not base64")
            managed = {r.get("name"): r.get("ignoredByScheduler") for r in x.get("managedResources") or []}
            want_res = facts["resource_names"](objs)
            if set(managed) != want_res:
                ext_problems.append(f"managedResources {sorted(managed)} differ from the device config's resource names {sorted(want_res)}")
            if not all(managed.values()):
                ext_problems.append("a managed resource is not ignoredByScheduler (kube-scheduler would count it against node capacity)")
        le = ks_cfg.get("leaderElection") or {}
        if le.get("leaderElect") and ext_elects and le.get("resourceName") == ext_lease:
            ext_problems.append(f"kube-scheduler and the extender both campaign for Lease {ext_lease}: one of them would never lead")
        if le.get("leaderElect") and ext_elects and replicas > 1:
            ext_problems.append(f"{replicas} replicas with two Leases (kube-scheduler's and --leader-elect): they may be held by "
                                "different pods, and the scheduling pod's extender would refuse every bind")
    elif replicas > 1 and not ext_elects:
        ext_problems.append(f"{replicas} replicas without a kube-scheduler sidecar and without --leader-elect: several would bind")

    # Client certificates: only kube-scheduler's may call /filter, /prioritize, /bind.
    ca_file = one(ef, "--client-ca-file")
    client_secret = None
    if sc.expect_client_auth and not ca_file:
        ext_problems.append("the extender has no --client-ca-file: anyone who reaches its port can filter and bind pods")
    if not sc.expect_client_auth and ca_file:
        ext_problems.append(f"--client-ca-file={ca_file} although scheduler.extender.clientAuth.enabled=false")
    if ca_file:
        if not https:
            ext_problems.append("--client-ca-file without --cert_file/--key_file: client certificates need HTTPS")
        m = mount_for(ec, ca_file)
        v = volume(espec, m["name"]) if m else None
        if not v or "secret" not in v:
            ext_problems.append(f"--client-ca-file={ca_file} is not mounted from a Secret in the extender")
        else:
            client_secret = v["secret"]["secretName"]
            items = {i["path"]: i["key"] for i in v["secret"].get("items") or []}
            relp = os.path.relpath(ca_file, m["mountPath"])
            if items.get(relp, relp) != "ca.crt":
                ext_problems.append(f"--client-ca-file={ca_file} is key {items.get(relp, relp)} of Secret {client_secret}, not ca.crt")
            if not items or "tls.key" in items.values():
                ext_problems.append(f"the extender mounts kube-scheduler's client key from Secret {client_secret}; it needs ca.crt only")
    if ks_cfg is not None:
        ktls = ((ks_cfg.get("extenders") or [{}])[0].get("tlsConfig") or {})
        cert, key = ktls.get("certFile"), ktls.get("keyFile")
        if ca_file and not (cert and key):
            ext_problems.append("the extender wants a client certificate (--client-ca-file) but kube-scheduler's tlsConfig "
                                "has no certFile/keyFile: every filter and bind would be refused (403)")
        if cert and key:
            ko, kspec, kc = ks[0]
            for f, want in ((cert, "tls.crt"), (key, "tls.key")):
                m = mount_for(kc, f)
                v = volume(kspec, m["name"]) if m else None
                if not v or "secret" not in v:
                    ext_problems.append(f"tlsConfig {f} is not mounted from a Secret in kube-scheduler")
                    continue
                items = {i["path"]: i["key"] for i in v["secret"].get("items") or []}
                relp = os.path.relpath(f, m["mountPath"])
                if items.get(relp, relp) != want:
                    ext_problems.append(f"tlsConfig {f} is key {items.get(relp, relp)} of its Secret, not {want}")
                if client_secret and v["secret"]["secretName"] != client_secret:
                    ext_problems.append(f"kube-scheduler's client certificate comes from Secret {v['secret']['secretName']}, "
                                        f"the extender's client CA from {client_secret}")
    if client_secret:
        csec = find("Secret", client_secret, eo["metadata"]["namespace"])
        if csec is None:
            if sc.expect_client_secret:
                ext_problems.append(f"the client-certificate Secret {client_secret} is not rendered")
        else:
            data = csec.get("data") or {}
            if verify_chain(data.get("ca.crt", ""), data.get("tls.crt", ""), ctx.work) is False:
                ext_problems.append(f"Secret {client_secret}: tls.crt is not signed by ca.crt: kube-scheduler would get 403")
            usage = tls_extended_key_usage(data.get("tls.crt", ""))
            if usage is not None and "TLS Web Client Authentication" not in usage:
                ext_problems.append(f"Secret {client_secret}: tls.crt is not a client certificate (extended key usage: {usage})")

    # The webhook.
    svc_name = None
    whs = by_kind.get("MutatingWebhookConfiguration", [])
    if not whs:
        ext_problems.append("no MutatingWebhookConfiguration")
    # The decision guard (pod UPDATE) goes to the same route; it must see
    # pods whatever their own labels say.
    guards = by_kind.get("ValidatingWebhookConfiguration", [])
    for wh in guards:
        for w in wh.get("webhooks", []):
            ops = [op for r in w.get("rules") or [] for op in r.get("operations") or []]
            if "UPDATE" not in ops:
                ext_problems.append(f"ValidatingWebhookConfiguration {wh['metadata']['name']}: no pod UPDATE rule")
            if w.get("objectSelector"):
                ext_problems.append(f"ValidatingWebhookConfiguration {wh['metadata']['name']}: an objectSelector "
                                    "lets a pod's author exempt it from the decision guard")
        writers = (one(ef, "--decision-writers") or "").split(",")
        for comp in ("hami-scheduler", "hami-device-plugin"):
            for o, spec, _ in containers_by_comp.get(comp, [])[:1]:
                sa = spec.get("serviceAccountName", "default")
                user = f"system:serviceaccount:{o['metadata']['namespace']}:{sa}"
                if user not in writers:
                    ext_problems.append(f"--decision-writers lacks {user}: the guard would refuse {comp}'s own writes")
    secret_name = None
    tls_vol = next((volume(espec, m["name"]) for m in ec.get("volumeMounts") or []
                    if (one(ef, "--cert_file") or "").startswith(m["mountPath"].rstrip("/") + "/")), None)
    if tls_vol and "secret" in tls_vol:
        secret_name = tls_vol["secret"]["secretName"]
    secret = find("Secret", secret_name, eo["metadata"]["namespace"]) if secret_name else None
    for wh in whs + guards:
        mutating = wh["kind"] == "MutatingWebhookConfiguration"
        for w in wh.get("webhooks", []):
            cc = (w.get("clientConfig") or {}).get("service") or {}
            svc = find("Service", cc.get("name"), cc.get("namespace"))
            svc_name = cc.get("name")
            if svc is None:
                ext_problems.append(f"webhook {w.get('name')}: Service {cc.get('namespace')}/{cc.get('name')} is not rendered")
            else:
                sel = svc["spec"].get("selector") or {}
                labels = eo["spec"]["template"]["metadata"].get("labels") or {}
                if not all(labels.get(k) == v for k, v in sel.items()):
                    ext_problems.append(f"webhook Service {svc_name} does not select the extender's pods")
                port = next((p for p in svc["spec"]["ports"] if p["port"] == cc.get("port", 443)), None)
                if port is None:
                    ext_problems.append(f"webhook port {cc.get('port', 443)} is not a port of Service {svc_name}")
                else:
                    tp = port.get("targetPort", port["port"])
                    tnum = cports.get(tp) if isinstance(tp, str) else tp
                    if tnum != bind_port:
                        ext_problems.append(f"webhook → Service port {port['port']} → targetPort {tp} ({tnum}), "
                                            f"but the extender listens on {bind_port}")
            if ("POST", cc.get("path")) not in routes:
                ext_problems.append(f"webhook path {cc.get('path')}: the extender has no route POST {cc.get('path')} "
                                    f"(it serves {sorted(p for m, p in routes if m == 'POST')})")
            if not https:
                ext_problems.append("the API server calls webhooks over HTTPS only, but the extender has no --cert_file/--key_file")
            if "v1" not in (w.get("admissionReviewVersions") or []):
                ext_problems.append("admissionReviewVersions does not include v1")
            if w.get("sideEffects") != "None":
                ext_problems.append(f"sideEffects {w.get('sideEffects')}, expected None")
            if w.get("failurePolicy") not in ("Ignore", "Fail"):
                ext_problems.append(f"failurePolicy {w.get('failurePolicy')}")
            for sel_name in ("objectSelector", "namespaceSelector") if mutating else ("namespaceSelector",):
                exprs = (w.get(sel_name) or {}).get("matchExpressions") or []
                if not any(e.get("key") == "hami.io/webhook" and e.get("operator") == "NotIn" and "ignore" in e.get("values", [])
                           for e in exprs):
                    ext_problems.append(f"{sel_name} does not exclude hami.io/webhook=ignore")
            for _, o, _ in workloads(objs):
                if (o["spec"]["template"]["metadata"].get("labels") or {}).get("hami.io/webhook") != "ignore":
                    ext_problems.append(f"{o['kind']} {o['metadata']['name']}: pods lack hami.io/webhook: ignore "
                                        "(our own pods must not wait for our webhook)")
            ca = (w.get("clientConfig") or {}).get("caBundle")
            inject = ((wh.get("metadata") or {}).get("annotations") or {}).get("cert-manager.io/inject-ca-from")
            if sc.expect_cert_manager:
                ext_problems += check_cert_manager(objs, eo, secret_name, inject, ca, cc, ks_cfg, find)
            elif sc.expect_ca_bundle is not None:
                if ca != sc.expect_ca_bundle:
                    ext_problems.append("caBundle is not scheduler.tls.caBundle")
            elif secret is None:
                ext_problems.append(f"the extender's TLS Secret {secret_name} is not rendered")
            else:
                data = secret.get("data") or {}
                if ca != data.get("ca.crt"):
                    ext_problems.append(f"caBundle differs from Secret {secret_name} ca.crt: the API server would not trust the extender")
                ok = verify_chain(data.get("ca.crt", ""), data.get("tls.crt", ""), ctx.work)
                if ok is False:
                    ext_problems.append(f"Secret {secret_name}: tls.crt is not signed by ca.crt")
                names = tls_subject_names(data.get("tls.crt", ""))
                host = f"{cc.get('name')}.{cc.get('namespace')}.svc"
                if names is not None and host not in names:
                    ext_problems.append(f"the certificate does not name {host} (it names {sorted(names)})")
                if ks_cfg is not None:
                    sn = ((ks_cfg.get("extenders") or [{}])[0].get("tlsConfig") or {}).get("serverName")
                    if names is not None and sn and sn not in names:
                        ext_problems.append(f"tlsConfig.serverName {sn} is not in the certificate ({sorted(names)})")
    report.check(f"{name} extender config ↔ extender (port, verbs, TLS, resources, Leases) and webhook ↔ Service ↔ /webhook",
                 ext_problems, f"{bind}, {'config ' + ks_cfg['apiVersion'] if ks_cfg else 'no sidecar'}, webhook via {svc_name}")

    # RBAC.
    check_rbac(sc, report, objs, containers_by_comp, ks_cfg, facts)
    if sc.upstream:
        check_upstream_values(ctx, sc, report, objs, notes, containers_by_comp, ks_cfg)
    return objs


def check_cert_manager(objs, eo, secret_name, inject, ca, cc, ks_cfg, find):
    """scheduler.certManager.enabled: a cert-manager Certificate writes the extender's TLS Secret and its
    CA is injected into the webhook; the chart makes no Secret of that name (cert-manager owns it)."""
    problems = []
    ns = eo["metadata"]["namespace"]
    if ca:
        problems.append("cert-manager mode, but the webhook has a caBundle of its own (cert-manager injects it)")
    if not inject or "/" not in inject:
        return problems + [f"cert-manager mode, but the webhook has no cert-manager.io/inject-ca-from annotation ({inject!r})"]
    cns, cname = inject.split("/", 1)
    cert = find("Certificate", cname, cns)
    if cert is None:
        return problems + [f"cert-manager.io/inject-ca-from names Certificate {inject}, which is not rendered"]
    spec = cert.get("spec") or {}
    if spec.get("secretName") != secret_name:
        problems.append(f"Certificate {cname} writes Secret {spec.get('secretName')}, but the extender mounts {secret_name}")
    if find("Secret", secret_name, ns) is not None:
        problems.append(f"Secret {secret_name} is rendered by the chart too: it would fight cert-manager over it")
    host = f"{cc.get('name')}.{cc.get('namespace')}.svc"
    names = set(spec.get("dnsNames") or [])
    if host not in names:
        problems.append(f"Certificate {cname} does not name {host} (dnsNames {sorted(names)})")
    if ks_cfg is not None:
        sn = ((ks_cfg.get("extenders") or [{}])[0].get("tlsConfig") or {}).get("serverName")
        if sn and sn not in names:
            problems.append(f"kube-scheduler's tlsConfig.serverName {sn} is not in Certificate {cname}'s dnsNames")
    ref = spec.get("issuerRef") or {}
    kind = ref.get("kind", "Issuer")
    if find(kind, ref.get("name"), cns if kind == "Issuer" else None) is None:
        problems.append(f"Certificate {cname}: issuerRef {kind} {ref.get('name')} is not rendered")
    return problems


# --------------------------------------------------------------------------
# Upstream HAMi's values files

def upstream_chart_dir(repo):
    """Upstream HAMi's chart (test input, not in the repo): $HAMI_UPSTREAM_CHART, else the shared
    reference directory beside the checkout (or beside the worktrees' parent)."""
    env = os.environ.get("HAMI_UPSTREAM_CHART")
    if env:
        return env
    for up in ("..", os.path.join("..", "..")):
        d = os.path.normpath(os.path.join(repo, up, "shared", "reference", "upstream-hami-chart-2.10"))
        if os.path.isfile(os.path.join(d, "values.yaml")):
            return d
    return os.path.normpath(os.path.join(repo, "..", "shared", "reference", "upstream-hami-chart-2.10"))


def dig_path(d, path):
    cur = d
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None, False
        cur = cur[k]
    return cur, True


def ignored_in_notes(notes):
    """Keys NOTES names as ignored: '- ignored: a.b, c.*: why' -> {a.b, c}."""
    keys = set()
    for line in notes.splitlines():
        m = re.match(r"\s*- ignored: (.*?): ", line)
        if m:
            keys.update(k.strip().removesuffix(".*") for k in m.group(1).split(","))
    return keys


def expected_image(img, glob, ours, app_version, kube_tag=None):
    """The image reference upstream's chart would make, with upstream's own image replaced by ours."""
    repo = img.get("repository") or ""
    tag = str(img.get("tag") or glob.get("imageTag") or (kube_tag or app_version))
    if kube_tag is not None:
        tag = str(img.get("tag") or kube_tag)
    if repo.removeprefix("docker.io/") == "projecthami/hami":
        repo, tag = ours, app_version
    reg = glob.get("imageRegistry") or img.get("registry") or ""
    return f"{reg.rstrip('/')}/{repo}:{tag}" if reg else f"{repo}:{tag}"


# Values that are Kubernetes fields passed through as they are: keys below them belong to the object.
PASSTHROUGH_VALUES = {"nodeSelector", "nvidiaNodeSelector", "tolerations", "affinity", "securityContext", "resources",
                      "updateStrategy", "podAnnotations", "podLabels", "labels", "annotations", "matchLabels"}


def merged(default, given):
    """What Helm makes of a map value given over a map default (keys merged, null deletes); None: not given."""
    if given is None:
        return None
    if not isinstance(default, dict) or not isinstance(given, dict):
        return given
    out = dict(default)
    for k, v in given.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def check_upstream_values(ctx, sc, report, objs, notes, containers_by_comp, ks_cfg):
    """The values file, written for upstream HAMi's chart, installs our chart: each of its keys is a
    value of ours (of the same shape) or named in NOTES, and the values that matter reach the objects."""
    name = f"[{sc.name}]"
    up = yaml.safe_load(read(os.path.join(ctx.repo, sc.values_file))) or {}
    ours = yaml.safe_load(read(os.path.join(ctx.chart, "values.yaml"))) or {}
    app_version = (yaml.safe_load(read(os.path.join(ctx.chart, "Chart.yaml"))) or {}).get("appVersion")

    # 1. No key is ignored silently.
    problems = []
    named = ignored_in_notes(notes)
    leaves = value_paths(up)
    for leaf in leaves:
        parts = leaf.split(".")
        if any(".".join(parts[:i]) in named for i in range(1, len(parts) + 1)):
            continue
        if dig_path(up, leaf)[0] is None:
            continue  # null removes a key in Helm: nothing is set
        # Inside a Kubernetes field the chart passes through (nodeSelector, securityContext, ...),
        # any key is the object's, not the chart's.
        cut = next((i for i, p in enumerate(parts) if p in PASSTHROUGH_VALUES), None)
        if cut is not None and cut < len(parts) - 1 and dig_path(ours, ".".join(parts[:cut + 1]))[1]:
            continue
        mine, found = dig_path(ours, leaf)
        if not found:
            problems.append(f"upstream value {leaf} is neither a value of this chart nor named as ignored in NOTES")
            continue
        theirs, _ = dig_path(up, leaf)
        if theirs in ({}, []) or mine in ({}, []):
            continue  # upstream writes an empty list as {} in places (extraEnvs)
        if theirs is not None and mine is not None and (isinstance(theirs, dict) != isinstance(mine, dict) or
                                                        isinstance(theirs, list) != isinstance(mine, list)):
            problems.append(f"upstream value {leaf} is a {type(theirs).__name__} there, a {type(mine).__name__} here")
    report.check(f"{name} every key of {sc.values_file} is a value of this chart (same shape) or named in NOTES",
                 problems, f"{len(leaves)} keys, {len(named)} named as ignored")

    # 2. The values reach the objects with upstream's meaning.
    problems = []
    glob = up.get("global") or {}
    s_up, dp_up = up.get("scheduler") or {}, up.get("devicePlugin") or {}

    def container(comp):
        got = containers_by_comp.get(comp) or []
        return got[0] if got else (None, None, None)

    eo, espec, ec = container("hami-scheduler")
    do, dspec, dc = container("hami-device-plugin")
    ao, aspec, ac = container("hami-node-agent")
    ko, kspec, kc = container("kube-scheduler")
    if ec is None or dc is None or ac is None:
        report.check(f"{name} upstream values reach the objects", ["no extender, device plugin or node agent"])
        return
    ef = flag_values(args_of(ec))
    pol = s_up.get("defaultSchedulerPolicy") or {}
    for key, flag in (("nodeSchedulerPolicy", "--node-scheduler-policy"), ("gpuSchedulerPolicy", "--gpu-scheduler-policy")):
        if key in pol and one(ef, flag) != str(pol[key]):
            problems.append(f"scheduler.defaultSchedulerPolicy.{key}={pol[key]} but the extender runs {flag}={one(ef, flag)}")
    dcfg = None
    for _, o in objs:
        if o["kind"] == "ConfigMap" and "device-config.yaml" in (o.get("data") or {}):
            dcfg = (yaml.safe_load(o["data"]["device-config.yaml"]) or {}).get("nvidia") or {}
    if dcfg is None:
        problems.append("no device config ConfigMap")
        dcfg = {}
    dflags = flag_values(args_of(dc))
    for key, flag in (("deviceSplitCount", "--device-split-count"), ("deviceMemoryScaling", "--device-memory-scaling"),
                      ("deviceCoreScaling", "--device-cores-scaling")):
        if key not in dp_up:
            continue
        if float(dcfg.get(key, "nan")) != float(dp_up[key]):
            problems.append(f"devicePlugin.{key}={dp_up[key]} but the device config has {key}: {dcfg.get(key)}")
        if one(dflags, flag) is not None and float(one(dflags, flag)) != float(dp_up[key]):
            problems.append(f"devicePlugin.{key}={dp_up[key]} but the device plugin runs {flag}={one(dflags, flag)}")
    for key, cfg_key in (("resourceName", "resourceCountName"), ("resourceMem", "resourceMemoryName"),
                         ("resourceMemPercentage", "resourceMemoryPercentageName"), ("resourceCores", "resourceCoreName"),
                         ("resourcePriority", "resourcePriorityName")):
        if key in up and dcfg.get(cfg_key) != up[key]:
            problems.append(f"{key}={up[key]} but the device config has {cfg_key}: {dcfg.get(cfg_key)}")
        if key in up and ks_cfg is not None:
            managed = {r.get("name") for x in ks_cfg.get("extenders") or [] for r in x.get("managedResources") or []}
            if up[key] not in managed:
                problems.append(f"{key}={up[key]} is not among kube-scheduler's managedResources {sorted(managed)}")
    # overwriteEnv (upstream writes "true"/"false" strings) and runtimeClassName reach the webhook
    # through the device config; the class also runs the device plugin, and createRuntimeClass makes it.
    if "overwriteEnv" in s_up:
        want = str(s_up["overwriteEnv"]).lower() == "true"
        if dcfg.get("overwriteEnv") is not want:
            problems.append(f"scheduler.overwriteEnv={s_up['overwriteEnv']} but the device config has "
                            f"overwriteEnv: {dcfg.get('overwriteEnv')!r}")
    if "runtimeClassName" in dp_up:
        want = dp_up["runtimeClassName"] or ""
        if dcfg.get("runtimeClassName", None) != want:
            problems.append(f"devicePlugin.runtimeClassName={want!r} but the device config has "
                            f"runtimeClassName: {dcfg.get('runtimeClassName')!r}")
        if (dspec.get("runtimeClassName") or "") != want:
            problems.append(f"devicePlugin.runtimeClassName={want!r} but the device plugin's pods run under "
                            f"{dspec.get('runtimeClassName')!r}")
        made = [o for _, o in objs if o["kind"] == "RuntimeClass"]
        if dp_up.get("createRuntimeClass") and want and [(o["metadata"]["name"], o.get("handler")) for o in made] != [(want, "nvidia")]:
            problems.append(f"devicePlugin.createRuntimeClass=true but the RuntimeClasses made are "
                            f"{[(o['metadata']['name'], o.get('handler')) for o in made]}, not [({want!r}, 'nvidia')]")
    nc = dp_up.get("nodeConfiguration")
    if isinstance(nc, dict) and nc.get("config") and not nc.get("externalConfigName"):
        m = mount_for(dc, one(dflags, "--node-config-file") or "/nonexistent")
        v = volume(dspec, m["name"]) if m else None
        cm = None
        if v and "configMap" in v:
            cm = next((o for _, o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == v["configMap"]["name"]), None)
        try:
            got = json.loads((cm or {}).get("data", {}).get("config.json", "null"))
        except ValueError as e:
            got = f"not JSON: {e}"
        if got != json.loads(nc["config"]):
            problems.append(f"devicePlugin.nodeConfiguration.config is not the config.json the device plugin reads "
                            f"(--node-config-file): {str(got)[:120]}")
    # Images, pull policies, pull secrets.
    kube_tag = None
    if kc is not None:
        kube_tag = "v" + re.match(r"v?(\d+\.\d+\.\d+)", sc.kube).group(1)
    for label, img, c, mine, kt in (("scheduler.extender.image", (s_up.get("extender") or {}).get("image"), ec, "hami-scheduler", None),
                                    ("devicePlugin.image", dp_up.get("image"), dc, "hami-device-plugin", None),
                                    ("scheduler.kubeScheduler.image", (s_up.get("kubeScheduler") or {}).get("image"), kc, None, kube_tag)):
        if not isinstance(img, dict) or c is None:
            continue
        want = expected_image(img, glob, mine, app_version, kt)
        if c.get("image") != want:
            problems.append(f"{label}: expected image {want}, the container runs {c.get('image')}")
        if img.get("pullPolicy") and c.get("imagePullPolicy") != img["pullPolicy"]:
            problems.append(f"{label}.pullPolicy={img['pullPolicy']} but the container has {c.get('imagePullPolicy')}")
    for o, spec, imgs in ((eo, espec, [(s_up.get("extender") or {}).get("image"), (s_up.get("kubeScheduler") or {}).get("image")]),
                          (do, dspec, [dp_up.get("image"), (dp_up.get("monitor") or {}).get("image")])):
        want = set(str(x) for x in glob.get("imagePullSecrets") or [])
        for img in imgs:
            want |= set(str(x) for x in (img or {}).get("pullSecrets") or [])
        got = {x.get("name") for x in spec.get("imagePullSecrets") or []}
        if want - got:
            problems.append(f"{o['kind']} {o['metadata']['name']}: imagePullSecrets {sorted(got)} lack {sorted(want - got)}")
    # Placement.
    s_ours, dp_ours = ours.get("scheduler") or {}, ours.get("devicePlugin") or {}
    for o, spec, sel_key, tol in ((eo, espec, merged(s_ours.get("nodeSelector"), s_up.get("nodeSelector")), s_up.get("tolerations")),
                                  (do, dspec, merged(dp_ours.get("nvidiaNodeSelector"), dp_up.get("nvidiaNodeSelector")),
                                   dp_up.get("tolerations"))):
        if sel_key is not None and (spec.get("nodeSelector") or {}) != sel_key:
            problems.append(f"{o['kind']} {o['metadata']['name']}: nodeSelector {spec.get('nodeSelector')}, the values say {sel_key}")
        if tol is not None and (spec.get("tolerations") or []) != tol:
            problems.append(f"{o['kind']} {o['metadata']['name']}: tolerations {spec.get('tolerations')}, the values say {tol}")
    # cert-manager.
    cm_on = bool((s_up.get("certManager") or {}).get("enabled"))
    has_cert = any(o["kind"] == "Certificate" for _, o in objs)
    if cm_on != has_cert:
        problems.append(f"scheduler.certManager.enabled={cm_on} but a cert-manager Certificate is "
                        f"{'' if has_cert else 'not '}rendered")
    report.check(f"{name} upstream's values reach the objects (policies, split/scaling, resource names, node config, "
                 "images, pull secrets, selectors, tolerations, cert-manager, overwriteEnv, runtime class)", problems)


def check_rbac(sc, report, objs, containers_by_comp, ks_cfg, facts):
    name = f"[{sc.name}]"
    problems = []
    roles = {}
    for _, o in objs:
        if o["kind"] in ("ClusterRole", "Role"):
            roles[(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])] = o.get("rules") or []
    bindings = [o for _, o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]

    def grants(sa_ns, sa):
        """[(namespace or None for cluster-wide, rule, role key)] bound to the ServiceAccount."""
        out = []
        for b in bindings:
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == sa_ns
                       for s in b.get("subjects") or []):
                continue
            ref = b["roleRef"]
            ns = None if b["kind"] == "ClusterRoleBinding" else b["metadata"]["namespace"]
            key = ("ClusterRole", None, ref["name"]) if ref["kind"] == "ClusterRole" else ("Role", ns, ref["name"])
            for r in roles.get(key, []):  # built-in roles (system:...) are not ours to check
                out.append((ns, r, key))
        return out

    def allowed(gs, group, resource, verb, ns, lease_name):
        for gns, r, _ in gs:
            if gns is not None and gns != ns:
                continue
            if not ({group, "*"} & set(r.get("apiGroups", []))):
                continue
            if not ({resource, "*"} & set(r.get("resources", []))):
                continue
            if not ({verb, "*"} & set(r.get("verbs", []))):
                continue
            names = r.get("resourceNames")
            if names and (verb in ("create", "list", "watch") or lease_name not in names):
                continue
            return True
        return False

    table = {}
    for comp, g, res, verb, where, why in API_CALLS:
        table.setdefault(comp, []).append((g, res, verb, where, why))
    used_by_sa = {}
    rows = 0
    for _, o, spec in workloads(objs):
        sa = spec.get("serviceAccountName") or "default"
        sa_ns = o["metadata"]["namespace"]
        if not any(x["kind"] == "ServiceAccount" and x["metadata"]["name"] == sa for _, x in objs):
            problems.append(f"{o['kind']} {o['metadata']['name']}: ServiceAccount {sa} is not rendered")
        gs = grants(sa_ns, sa)
        for _, c in all_containers(spec):
            comp = component_of(c)
            if comp not in table:
                continue
            fl = flag_values(args_of(c))
            for g, res, verb, where, why in table[comp]:
                lease_ns, lease_name = None, None
                if (g, res) == LEASE_CALL:
                    if comp == "hami-scheduler":
                        if "--leader-elect" not in fl:
                            continue
                        lease_name = one(fl, "--leader-elect-resource-name") or "hami-scheduler"
                        lease_ns = one(fl, "--leader-elect-resource-namespace") or sa_ns
                    else:
                        le = (ks_cfg or {}).get("leaderElection") or {}
                        if not le.get("leaderElect", True):
                            continue
                        lease_name = le.get("resourceName", "kube-scheduler")
                        lease_ns = le.get("resourceNamespace", "kube-system")
                rows += 1
                used_by_sa.setdefault((sa_ns, sa), set()).add((g, res, verb))
                if not allowed(gs, g, res, verb, lease_ns, lease_name):
                    what = f"{verb} {g + '/' if g else ''}{res}" + (f" {lease_ns}/{lease_name}" if lease_name else "")
                    problems.append(f"{comp} in {o['kind']} {o['metadata']['name']} calls {what} ({where}: {why}), "
                                    f"but ServiceAccount {sa} is not granted it")
    # Exactly what is used: our roles grant nothing beyond the table.
    for (sa_ns, sa), used in used_by_sa.items():
        for gns, r, key in grants(sa_ns, sa):
            for g in r.get("apiGroups", []):
                for res in r.get("resources", []):
                    for verb in r.get("verbs", []):
                        if (g, res, verb) not in used:
                            problems.append(f"{key[0]} {key[2]} grants {verb} {g + '/' if g else ''}{res} to {sa}, "
                                            "which no container using it calls: remove it (or add the call to API_CALLS)")
    report.check(f"{name} RBAC grants every API call of the code (table: deploy/tools/check_chart.py API_CALLS) and nothing more",
                 problems, f"{rows} calls")


# --------------------------------------------------------------------------
# Facts gathered once

def gather_facts(ctx, report):
    facts = {"binaries": {}, "flags": {}}
    problems = []
    exe = executable_sources(ctx.repo)
    for b, src in BINARIES.items():
        if exe.get(b) != src:
            problems.append(f"CMake builds {b} from {exe.get(b)}, the check expects {src}: update BINARIES")
    bin_note = []
    for b, src in BINARIES.items():
        path = os.path.join(ctx.build_dir, "src", b) if ctx.build_dir else None
        if path and os.access(path, os.X_OK):
            try:
                facts["flags"][b] = (flags_from_help(path), f"`{rel(ctx, path)} --help`")
                facts["binaries"][b] = path
                bin_note.append(f"{b}: --help")
                continue
            except (CannotRun, subprocess.TimeoutExpired, OSError) as e:
                print(f"note: {e}; reading {b}'s flags from the source instead")
        files = FLAG_SOURCES[b]
        facts["flags"][b] = (flags_from_source([os.path.join(ctx.repo, f) for f in files]),
                             f"parsed from {', '.join(files)}")
        bin_note.append(f"{b}: source")
    report.check("our binaries and where their flags come from", problems, ", ".join(bin_note))

    found, unresolved = scan_api_calls(ctx.repo)
    problems = [f"cannot tell which resource this call uses: {u} (teach scan_api_calls, then add it to API_CALLS)"
                for u in unresolved]
    table = {(c, g, r, v) for c, g, r, v, _, _ in API_CALLS if c in SOURCE_DIRS}
    for key, wheres in sorted(found.items()):
        if key not in table:
            c, g, r, v = key
            problems.append(f"{c} calls {v} {g + '/' if g else ''}{r} ({', '.join(wheres[:3])}) but API_CALLS "
                            "does not list it: add the row and the chart's RBAC rule")
    for key in sorted(table - set(found)):
        c, g, r, v = key
        problems.append(f"API_CALLS lists {v} {g + '/' if g else ''}{r} for {c}, but the code no longer calls it: "
                        "remove the row and the chart's RBAC rule")
    report.check("API calls in the code (src/scheduler, src/deviceplugin, src/monitor, k8s leader election) match API_CALLS",
                 problems, f"{len(found)} (component, resource, verb) found")

    facts["metrics"] = metric_names(ctx.repo)
    facts["routes"] = scheduler_routes(ctx.repo)

    def resource_names(objs):
        for _, o in objs:
            if o["kind"] == "ConfigMap" and "device-config.yaml" in (o.get("data") or {}):
                nv = (yaml.safe_load(o["data"]["device-config.yaml"]) or {}).get("nvidia") or {}
                return {nv.get(k) for k in ("resourceCountName", "resourceMemoryName", "resourceMemoryPercentageName",
                                             "resourceCoreName", "resourcePriorityName") if nv.get(k)}
        return set()
    facts["resource_names"] = resource_names
    return facts


def value_paths(d, prefix=""):
    out = []
    for k, v in d.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out += value_paths(v, path)
        else:
            out.append(path)
    return out


TEMPLATE_ACTION = re.compile(r"\{\{.*?\}\}", re.S)
TEMPLATE_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
VALUES_PATH = re.compile(r"\.Values((?:\.[A-Za-z_]\w*)+)")
VALUES_VAR = re.compile(r"\$(\w+)\s*:?=\s*(?:\$|\.root|\$\w+)?\.Values((?:\.[A-Za-z_]\w*)+)\s*(?=-?\}\}|\))")
VAR_PATH = re.compile(r"\$(\w+)((?:\.[A-Za-z_]\w*)+)")


def check_values_read_exist(ctx, report):
    """Helm renders a value that is not there as empty (it has no missingkey=error outside its Go API),
    so a misspelt .Values path would go unseen: every path a template reads, directly or through a
    variable set to one (`$svc := .Values.devicePlugin.service` ... `$svc.type`), must be in values.yaml."""
    defaults = yaml.safe_load(read(os.path.join(ctx.chart, "values.yaml"))) or {}

    def missing(path):
        cur, done = defaults, []
        for k in path:
            if not isinstance(cur, dict):
                return f"{'.'.join(done)} is not a map"
            if k not in cur:
                return f"values.yaml has no {k} under {'.'.join(done) or 'the top'}"
            cur = cur[k]
            done.append(k)
        return None

    problems, n = [], 0
    for root, _, files in os.walk(os.path.join(ctx.chart, "templates")):
        for f in sorted(files):
            path = os.path.join(root, f)
            text = "\n".join(TEMPLATE_ACTION.findall(TEMPLATE_COMMENT.sub("", read(path))))
            variables = {}
            for m in VALUES_VAR.finditer(text):
                variables.setdefault(m.group(1), set()).add(m.group(2))
            refs = [(m.group(0), m.group(1).split(".")[1:]) for m in VALUES_PATH.finditer(text)]
            for m in VAR_PATH.finditer(text):
                if len(variables.get(m.group(1), ())) == 1:  # one meaning in this file
                    base = next(iter(variables[m.group(1)])).split(".")[1:]
                    refs.append((m.group(0), base + m.group(2).split(".")[1:]))
            for shown, p in refs:
                n += 1
                why = missing(p)
                if why:
                    problems.append(f"{rel(ctx, path)} reads {shown} (.Values.{'.'.join(p)}): {why}")
    report.check("every value a template reads is in values.yaml (Helm renders a missing one as empty)",
                 sorted(set(problems)), f"{n} reads")


def check_values_documented(ctx, report):
    """docs/install.md's table names every value of values.yaml, and only those."""
    doc_path = os.path.join(ctx.repo, "docs", "install.md")
    values = yaml.safe_load(read(os.path.join(ctx.chart, "values.yaml"))) or {}
    leaves = value_paths(values)
    documented = set()
    for line in read(doc_path).splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        toks = re.findall(r"`([^`]+)`", cell)
        if not toks:
            continue
        first = toks[0]
        documented.add(first)
        parent = first.rsplit(".", 1)[0] if "." in first else ""
        for t in toks[1:]:
            documented.add(parent + t if t.startswith(".") else t)
    problems = []
    for leaf in leaves:
        if not any(leaf == d or leaf.startswith(d + ".") for d in documented):
            problems.append(f"value {leaf} is not in the values table of docs/install.md")
    known = set(leaves)
    for d in sorted(documented):
        if not any(k == d or k.startswith(d + ".") for k in known):
            problems.append(f"docs/install.md documents {d}, which values.yaml does not have")
    report.check("docs/install.md documents every chart value (and no other)", problems, f"{len(leaves)} values")


def run_checks(ctx, scenarios=None, quiet=False, runtime_libs=True, refusals=True):
    report = Report(quiet)
    facts = gather_facts(ctx, report)
    images = check_dockerfiles(ctx, report)
    if runtime_libs:
        check_runtime_libraries(ctx, images, report)
    check_dashboard(ctx, report, facts["metrics"])
    check_values_documented(ctx, report)
    check_values_read_exist(ctx, report)
    if refusals:
        check_upstream_refusals(ctx, report)
    for sc in scenarios or all_scenarios(ctx, quiet):
        check_scenario(ctx, sc, report, facts, images)
    return report


# Upstream values this chart cannot honour and must not ignore: each must fail the render, saying why.
UPSTREAM_REFUSALS = [
    (["devices.ascend.enabled=true"], "devices.ascend.enabled=true: ascend devices are not supported"),
    (["devices.iluvatar.enabled=true"], "devices.iluvatar.enabled=true"),
    (["global.managedNodeSelectorEnable=true"], "global.managedNodeSelectorEnable=true is not supported"),
    (["namespaceOverride=gpu"], "namespaceOverride=gpu is not supported"),
    (["podSecurityPolicy.enabled=true"], "podSecurityPolicy.enabled=true is not supported"),
    (["mockDevicePlugin.enabled=true"], "mockDevicePlugin.enabled=true is not supported"),
    (["scheduler.nodeLabelSelector.gpu=on"], "scheduler.nodeLabelSelector is not supported"),
    (["scheduler.admissionWebhook.customURL.enabled=true"], "customURL.enabled=true is not supported"),
    (["scheduler.admissionWebhook.manageNamespaceSelector=false"], "manageNamespaceSelector=false is not supported"),
    (["devicePlugin.enabled=false"], "devicePlugin.enabled=false is not supported"),
    (["devicePlugin.gpuOperatorToolkitReady.enabled=true"], "gpuOperatorToolkitReady.enabled=true is not supported"),
    (["devicePlugin.preConfiguredDeviceMemory=131072"], "preConfiguredDeviceMemory is not supported"),
    (["devicePlugin.passDeviceSpecsEnabled=true"], "passDeviceSpecsEnabled=true is not supported"),
    (["devicePlugin.deviceListStrategy=volume-mounts"], "deviceListStrategy=volume-mounts is not supported"),
    (["devicePlugin.gdsEnabled=true"], "devicePlugin.gdsEnabled is not supported"),
    (["devicePlugin.libPath=/opt/vgpu"], "devicePlugin.libPath=/opt/vgpu"),
    (["devicePlugin.monitor.ctrPath=/opt/vgpu/containers"], "devicePlugin.monitor.ctrPath=/opt/vgpu/containers"),
    (["devicePlugin.hostPID=false"], "devicePlugin.hostPID=false is not supported"),
    (["devicePlugin.hostNetwork=true"], "devicePlugin.hostNetwork=true is not supported"),
    (["devicePlugin.migStrategy=mixed"], "devicePlugin.migStrategy \"mixed\": MIG is not supported"),
    (["scheduler.certManager.enabled=true", "scheduler.tls.existingSecret=x", "scheduler.tls.caBundle=eA=="],
     "scheduler.certManager.enabled and scheduler.tls.existingSecret are both set"),
    (["devicePlugin.nodeConfiguration.config=not json"], "devicePlugin.nodeConfiguration.config is not JSON"),
]


def check_upstream_refusals(ctx, report):
    problems = []
    for sets, expect in UPSTREAM_REFUSALS:
        sc = Scenario("refusal", "", sets=sets)
        try:
            render(ctx, sc)
            problems.append(f"--set {' '.join(sets)} renders: upstream's meaning is silently lost (expected a failure: {expect})")
        except CannotRun as e:
            if expect not in str(e):
                problems.append(f"--set {' '.join(sets)} fails, but not saying {expect!r}: {str(e)[:200]}")
    report.check("upstream values this chart cannot honour fail the render with a reason", problems,
                 f"{len(UPSTREAM_REFUSALS)} values")


def upstream_defaults_scenario(ctx, quiet=False):
    """Our chart rendered with upstream HAMi's own default values.yaml, when that chart is at hand."""
    d = upstream_chart_dir(ctx.repo)
    vf = os.path.join(d, "values.yaml")
    if not os.path.isfile(vf):
        if not quiet:
            print(f"skip [upstream-defaults]: no upstream HAMi chart at {d} (set HAMI_UPSTREAM_CHART to its directory)")
        return None
    return Scenario("upstream-defaults", f"upstream HAMi v2.10's default values.yaml ({vf})",
                    values_file=os.path.abspath(vf), upstream=True,
                    expect_kube_scheduler_tag="v1.30.0")


def all_scenarios(ctx, quiet=False):
    up = upstream_defaults_scenario(ctx, quiet)
    return SCENARIOS + ([up] if up else [])


# --------------------------------------------------------------------------
# Self-test: broken copies must fail, each with the expected message.

def self_test(ctx):
    base = tempfile.mkdtemp(prefix="hami-check-selftest-", dir=ctx.work)

    def copy():
        d = tempfile.mkdtemp(dir=base)
        chart = os.path.join(d, "hami")
        shutil.copytree(ctx.chart, chart, symlinks=False)
        docker = os.path.join(d, "docker")
        shutil.copytree(ctx.docker_dir, docker)
        dash = os.path.join(d, "hami-dashboard.json")
        shutil.copyfile(ctx.dashboard, dash)
        os.remove(os.path.join(chart, "dashboards", "hami-dashboard.json"))
        os.symlink(dash, os.path.join(chart, "dashboards", "hami-dashboard.json"))
        work = os.path.join(d, "work")
        os.mkdir(work)
        return Ctx(ctx.repo, chart, docker, ctx.dockerignore, dash, ctx.helm, ctx.build_dir, work,
                   ctx.yamllint_config)

    def edit(path, old, new, count=1):
        text = read(path)
        if old not in text:
            raise CannotRun(f"self-test mutation did not apply: {old!r} not in {path}")
        with open(path, "w") as f:
            f.write(text.replace(old, new, count))

    T = "templates"
    cases = [
        ("a flag the binary does not accept",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"), "--http_bind=", "--http-bind-address="),
         "does not accept"),
        ("a flag value the binary refuses" if ctx.build_dir_has_binaries else "a log level flag renamed",
         (lambda c: edit(os.path.join(c.chart, T, "device-plugin/daemonset.yaml"),
                         "--log-level={{ int $dpArgs.level }}", "--log-level=verbose"))
         if ctx.build_dir_has_binaries else
         (lambda c: edit(os.path.join(c.chart, T, "device-plugin/daemonset.yaml"), "--log-level=", "--loglevel=")),
         "refuses its arguments: --log-level" if ctx.build_dir_has_binaries else "does not accept"),
        ("extender URL on another port than the extender listens on",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/kube-scheduler-config.yaml"),
                        "https://127.0.0.1:{{ $port }}", "https://127.0.0.1:9443"),
         "urlPrefix port 9443"),
        ("an extender verb the extender does not serve",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/kube-scheduler-config.yaml"),
                        "prioritizeVerb: prioritize", "prioritizeVerb: score"),
         "no route POST /score"),
        ("kube-scheduler without its client certificate",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/kube-scheduler-config.yaml"),
                        "certFile: /client-tls/tls.crt", "# certFile: /client-tls/tls.crt"),
         "has no certFile/keyFile"),
        ("the extender without a client CA",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"),
                        "- --client-ca-file=/client-ca/ca.crt", ""),
         "has no --client-ca-file"),
        ("the extender given kube-scheduler's key",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"),
                        'secretName: {{ include "hami.clientTLS.secretName" . }}\n            items:\n'
                        '              - key: ca.crt\n',
                        'secretName: {{ include "hami.clientTLS.secretName" . }}\n            items:\n'
                        '              - key: tls.key\n                path: tls.key\n              - key: ca.crt\n'),
         "it needs ca.crt only"),
        ("the webhook on a path the server does not serve",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/webhook.yaml"), "path: /webhook", "path: /mutate"),
         "webhook path /mutate"),
        ("the decision guard refusing the device plugin's own writes",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"),
                        '(printf "system:serviceaccount:%s:%s" .Release.Namespace (include "hami.devicePlugin.fullname" .))',
                        ""),
         "--decision-writers lacks system:serviceaccount:"),
        ("a decision guard a pod's own label exempts",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/webhook.yaml"),
                        "    # Namespaces only: a pod's own hami.io/webhook=ignore label, which its\n",
                        "    objectSelector: {matchLabels: {guarded: \"yes\"}}\n"),
         "an objectSelector lets a pod's author exempt it"),
        ("RBAC without pods/binding",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/rbac.yaml"), "resources: [pods/binding]", "resources: [pods/status]"),
         "calls create pods/binding"),
        ("RBAC granting a verb nothing uses",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/rbac.yaml"), "verbs: [get, patch]", "verbs: [get, patch, delete]"),
         "grants delete nodes"),
        ("a dashboard metric our code does not export",
         lambda c: edit(c.dashboard, "hami_vgpu_memory_used_bytes{", "hami_vgpu_memory_usage_bytes{"),
         "metric hami_vgpu_memory_usage_bytes is not exported"),
        ("an image no Dockerfile builds",
         lambda c: edit(os.path.join(c.chart, "values.yaml"), "repository: hami-scheduler", "repository: hami-extender"),
         "not built by any Dockerfile"),
        ("a Dockerfile COPY of a missing path",
         lambda c: edit(os.path.join(c.docker_dir, "scheduler.Dockerfile"), "COPY tools tools", "COPY toolz toolz"),
         "COPY toolz: no such file"),
        ("the image no longer holds the binary the chart runs",
         lambda c: edit(os.path.join(c.docker_dir, "device-plugin.Dockerfile"),
                        "/usr/local/bin/hami-node-agent\n", "/usr/local/bin/node-agent\n"),
         "runs /usr/local/bin/hami-node-agent, which"),
        ("an unquoted on in a nodeSelector (a boolean)",
         lambda c: edit(os.path.join(c.chart, "values.yaml"), 'gpu: "on"', "gpu: on"),
         "not a string"),
        ("a value misspelt (Helm renders it empty)",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/service.yaml"), "{{ $svc.type }}", "{{ $svc.kind }}"),
         "reads $svc.kind (.Values.devicePlugin.service.kind): values.yaml has no kind"),
        ("a template error",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/service.yaml"), "{{ $svc.type }}",
                        "{{ $svc.type | nosuchfunc }}"),
         'helm template: Error: parse error at (hami/templates/device-plugin/service.yaml:14): function "nosuchfunc" not defined'),
        ("a duplicate key (yamllint)",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/service.yaml"),
                        "  type: {{ $svc.type }}", "  type: {{ $svc.type }}\n  type: ClusterIP"),
         "key-duplicates"),
    ]
    cases.append(("a chart value docs/install.md does not explain",
                  lambda c: edit(os.path.join(c.chart, "values.yaml"), "legacyMetrics: false", "legacyMetrics: false\nnewKnob: 1"),
                  "value newKnob is not in the values table"))
    # Upstream's values (scenarios upstream-common and upstream-defaults): each case breaks one way a
    # value of upstream's shape reaches the objects, or one NOTES line.
    up = ["upstream-common"]
    cases += [
        ("an upstream key dropped from NOTES",
         lambda c: edit(os.path.join(c.chart, T, "_upstream.tpl"),
                        '{{- $notes = append $notes "scheduler.livenessProbe: not used; ',
                        '{{- $notes = append $notes "scheduler.livenesProbe: not used; '),
         "upstream value scheduler.livenessProbe is neither a value of this chart nor named", ["upstream-defaults"]),
        ("an upstream map that is a scalar here",
         lambda c: edit(os.path.join(c.chart, "values.yaml"), "  certManager:\n    enabled: false", "  certManager: false"),
         "upstream value scheduler.certManager.enabled", up),
        ("an upstream value refused no more",
         lambda c: edit(os.path.join(c.chart, T, "_upstream.tpl"),
                        '{{- if $dp.passDeviceSpecsEnabled }}{{ fail', '{{- if false }}{{ fail'),
         "--set devicePlugin.passDeviceSpecsEnabled=true renders: upstream's meaning is silently lost"),
        ("the node policy not passed to the extender",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"),
                        "--node-scheduler-policy={{ .Values.scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy }}",
                        "--node-scheduler-policy=binpack"),
         "nodeSchedulerPolicy=spread but the extender runs", up),
        ("the split count not in the device config",
         lambda c: edit(os.path.join(c.chart, T, "device-config.yaml"),
                        "deviceSplitCount: {{ int .Values.devicePlugin.deviceSplitCount }}", "deviceSplitCount: 10"),
         "devicePlugin.deviceSplitCount=4 but the device config has", up),
        ("overwriteEnv not in the device config",
         lambda c: edit(os.path.join(c.chart, T, "device-config.yaml"),
                        'overwriteEnv: {{ eq (toString .Values.scheduler.overwriteEnv | lower) "true" }}',
                        "overwriteEnv: false"),
         "scheduler.overwriteEnv=true but the device config has overwriteEnv: False", up),
        ("the runtime class not given to the webhook",
         lambda c: edit(os.path.join(c.chart, T, "device-config.yaml"),
                        "runtimeClassName: {{ .Values.devicePlugin.runtimeClassName | quote }}", 'runtimeClassName: ""'),
         "devicePlugin.runtimeClassName='nvidia' but the device config has runtimeClassName: ''", up),
        ("memory scaling rounded to a whole number",
         lambda c: edit(os.path.join(c.chart, T, "device-config.yaml"),
                        "deviceMemoryScaling: {{ .Values.devicePlugin.deviceMemoryScaling }}",
                        "deviceMemoryScaling: {{ int .Values.devicePlugin.deviceMemoryScaling }}"),
         "devicePlugin.deviceMemoryScaling=1.5 but the device config has", up),
        ("a resource name not in the device config",
         lambda c: edit(os.path.join(c.chart, T, "device-config.yaml"),
                        "resourceCoreName: {{ .Values.resourceCores | quote }}", 'resourceCoreName: "nvidia.com/gpucores"'),
         "resourceCores=example.com/vgpu-cores but the device config has", up),
        ("nodeConfiguration.config not what the plugin reads",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/node-config.yaml"),
                        '{{- $json = get $nc "config" | default', '{{- $json = "" | default'),
         "devicePlugin.nodeConfiguration.config is not the config.json", up),
        ("an image's registry ignored",
         lambda c: edit(os.path.join(c.chart, T, "_helpers.tpl"),
                        '{{- $reg := $r.Values.global.imageRegistry | default (get .image "registry") -}}',
                        '{{- $reg := $r.Values.global.imageRegistry -}}'),
         "scheduler.extender.image: expected image registry.example.com/gpu/hami-scheduler:0.1.0-rc2", up),
        ("kube-scheduler's image map ignored",
         lambda c: edit(os.path.join(c.chart, T, "_helpers.tpl"),
                        '{{- $tag = get $ks.image "tag" | default (get $ks "imageTag") -}}', '{{- $tag = "" -}}'),
         "scheduler.kubeScheduler.image: expected image mirror.example.com/k8s/kube-scheduler:v1.30.2", up),
        ("an image's pullPolicy ignored",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/daemonset.yaml"),
                        "imagePullPolicy: {{ $dp.image.pullPolicy }}", "imagePullPolicy: IfNotPresent", 2),
         "devicePlugin.image.pullPolicy=Always but the container has IfNotPresent", up),
        ("global.imagePullSecrets ignored",
         lambda c: edit(os.path.join(c.chart, T, "_helpers.tpl"),
                        "(.root.Values.global.imagePullSecrets | default list)", "list"),
         "lack ['regcred']", up),
        ("an image's pullSecrets ignored",
         lambda c: edit(os.path.join(c.chart, T, "_helpers.tpl"),
                        '{{ $all = concat $all (get . "pullSecrets" | default list) }}', ""),
         "lack ['mirror-cred', 'scheduler-cred']", up),
        ("the scheduler's nodeSelector ignored",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/deployment.yaml"),
                        "{{- with .Values.scheduler.nodeSelector }}", "{{- with .Values.scheduler.podLabels }}"),
         "Deployment hami-scheduler: nodeSelector", up),
        ("the device plugin's tolerations ignored",
         lambda c: edit(os.path.join(c.chart, T, "device-plugin/daemonset.yaml"),
                        "{{- with $dp.tolerations }}", "{{- with $dp.podLabels }}"),
         "DaemonSet hami-device-plugin: tolerations", up),
        ("certManager.enabled ignored",
         lambda c: edit(os.path.join(c.chart, T, "_helpers.tpl"),
                        "{{- if .Values.scheduler.certManager.enabled -}}", "{{- if false -}}"),
         "scheduler.certManager.enabled=True but a cert-manager Certificate is not rendered", up),
        ("cert-manager's CA not injected into the webhook",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/webhook.yaml"),
                        '{{- $_ := set $whAnnotations "cert-manager.io/inject-ca-from"', '{{- $_ := set $whAnnotations "inject-ca-from"'),
         "has no cert-manager.io/inject-ca-from annotation", up),
        ("the Certificate writing another Secret than the extender mounts",
         lambda c: edit(os.path.join(c.chart, T, "scheduler/cert-manager.yaml"),
                        'secretName: {{ include "hami.tls.secretName" . }}', "secretName: hami-other-tls"),
         "writes Secret hami-other-tls, but the extender mounts", up),
    ]
    if ctx.build_dir_has_binaries:
        cases.append(("a runtime library the image does not install",
                      lambda c: edit(os.path.join(c.docker_dir, "scheduler.Dockerfile"), " libyaml-cpp0.7", ""),
                      "from package libyaml-cpp0.7"))
    default = [s for s in SCENARIOS if s.name == "default"]
    by_name = {s.name: s for s in all_scenarios(ctx, quiet=False)}
    passed, failed = 0, 0
    start = time.time()
    sanity = run_checks(copy(), default + [by_name[n] for n in ("upstream-common", "upstream-defaults") if n in by_name],
                        quiet=True, runtime_libs=False)
    if sanity.failed:
        print("FAIL self-test: the unmodified copy already fails:")
        for m in sanity.messages():
            print(f"     - {m}")
        failed += 1
    else:
        print(f"ok   self-test: the unmodified copy passes ({sanity.passed} checks)")
        passed += 1
    for case in cases:
        title, mutate, expect = case[:3]
        names = case[3] if len(case) > 3 else ["default"]
        if any(n not in by_name for n in names):
            print(f"skip self-test: {title}: scenario {', '.join(n for n in names if n not in by_name)} is skipped")
            continue
        c = copy()
        try:
            mutate(c)
        except CannotRun as e:
            print(f"FAIL self-test: {title}: {e}")
            failed += 1
            continue
        r = run_checks(c, [by_name[n] for n in names], quiet=True, runtime_libs="runtime library" in title,
                       refusals="refused" in title)
        hits = [p for _, ps in r.failed for p in ps if expect in p]
        if hits:
            print(f"ok   self-test: {title}: caught: {hits[0][:200]}")
            passed += 1
        else:
            print(f"FAIL self-test: {title}: expected a failure containing {expect!r}, got "
                  + ("no failure" if not r.failed else "; ".join(r.messages())[:400]))
            failed += 1
    shutil.rmtree(base, ignore_errors=True)
    print(f"self-test: {passed} passed, {failed} failed ({time.time() - start:.0f}s)")
    return failed == 0


# --------------------------------------------------------------------------

@dataclass
class Ctx:
    repo: str
    chart: str
    docker_dir: str
    dockerignore: str
    dashboard: str
    helm: str
    build_dir: str
    work: str
    yamllint_config: str

    @property
    def build_dir_has_binaries(self):
        return bool(self.build_dir) and all(os.access(os.path.join(self.build_dir, "src", b), os.X_OK) for b in BINARIES)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--repo", default=os.path.abspath(os.path.join(here, "..", "..")))
    ap.add_argument("--helm", required=True, help="the helm binary (scripts/setup-helm.sh prints its path)")
    ap.add_argument("--build-dir", default=None, help="a CMake build directory with src/hami-*; default build/release")
    ap.add_argument("--work", default=None, help="directory for rendered files (default: a temporary one)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--render-only", metavar="OUT", help="render the default values into OUT and exit")
    ap.add_argument("--kube-version", default="v1.30.0")
    ap.add_argument("--namespace", default="kube-system")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    build = a.build_dir if a.build_dir is not None else os.path.join(repo, "build", "release")
    build = os.path.abspath(build) if build and os.path.isdir(build) else None
    work = a.work or tempfile.mkdtemp(prefix="hami-check-")
    os.makedirs(work, exist_ok=True)
    ctx = Ctx(repo, os.path.join(repo, "deploy/helm/hami"), os.path.join(repo, "deploy/docker"),
              os.path.join(repo, ".dockerignore"), os.path.join(repo, "deploy/grafana/hami-dashboard.json"),
              os.path.abspath(a.helm), build, work, os.path.join(repo, "deploy/tools/yamllint.yaml"))
    if a.render_only:
        sc = Scenario("e2e", "", kube=a.kube_version, namespace=a.namespace)
        try:
            text, _ = render(ctx, sc)
        except CannotRun as e:
            print(f"check_chart.py: cannot render: {e}", file=sys.stderr)
            return 1
        with open(a.render_only, "w") as f:
            f.write(text)
        return 0
    if a.self_test:
        return 0 if self_test(ctx) else 1
    start = time.time()
    report = run_checks(ctx)
    print(f"rendered manifests: {work}")
    print(f"check: {report.passed} passed, {len(report.failed)} failed ({time.time() - start:.0f}s)")
    return 0 if not report.failed else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CannotRun as e:
        print(f"check_chart.py: {e}", file=sys.stderr)
        sys.exit(2)
