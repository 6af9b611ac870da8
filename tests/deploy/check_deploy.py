#!/usr/bin/python3
"""Checks the deploy files against each other and against the code.

  tests/deploy/check_deploy.py [ROOT]                 # every check; exit 1 on a problem
  tests/deploy/check_deploy.py --self-test [ROOT]     # breaks copies, each must be caught
  tests/deploy/check_deploy.py --systemd-unit RETRYD [ROOT]
                                                      # systemd-analyze verify; 77 without it

No container engine runs here, so this checks what can be checked without
one (docs/deploying.md, "What the deploy files promise"):

* scripts/setup.sh's RUNTIME_PACKAGES are what deploy/Dockerfile's runtime
  stage installs;
* every YAML under deploy/ parses;
* the Kubernetes probes are `grpc:` probes on the health-only listener's
  port (the config's control.health_listen_address, a containerPort named
  `health`): livenessProbe and startupProbe ask `retryd.liveness`,
  readinessProbe `retryd.readiness`, and none asks `retryd.downstream`;
* the config is mounted where the Dockerfile's ENTRYPOINT reads it (Kubernetes,
  compose and the systemd unit alike);
* the image runs as a numeric non-root USER, and the manifest says
  runAsNonRoot with that user;
* the compose file's Kafka image is the version the tests pin
  (scripts/kafka.sh), and the topics it creates are the ones its config
  names and the docs list;
* every termination grace (terminationGracePeriodSeconds, compose's
  stop_grace_period, the unit's TimeoutStopSec) exceeds the drain bound of
  the config it runs: shutdown_timeout_ms / 1000 + 5 seconds;
* a PodDisruptionBudget selects the Deployment's pods and lets one go;
* the Deployment passes POD_NAME and POD_NAMESPACE from the Downward API.

--self-test runs the checks on a pristine copy of the files (they must
pass, and make at least MIN_CHECKS checks) and then on copies broken one way
each (each must fail, saying why), so that the checks cannot pass by
reading nothing. Needs Debian's python3-yaml.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from missing_tool import missing_tool  # noqa: E402

SKIPPED = 77
# The graceful stop's slack beyond shutdown_timeout_ms, in seconds: each
# thread's last commit and group leave (about 2 s past the deadline), the
# control API's 2 s grace beside it, and the process's exit.
STOP_SLACK_S = 5
MIN_CHECKS = 25
LIVENESS = "retryd.liveness"
READINESS = "retryd.readiness"
DOWNSTREAM = "retryd.downstream"

# Files the checks read, relative to the repository root.
FILES = [
    "deploy", "scripts/setup.sh", "scripts/kafka.sh", "proto/retryd/v1/config.proto",
    "docs/deploying.md",
]


class Checks:
    """Collects the outcome of each check."""

    def __init__(self):
        self.made = 0
        self.problems = []

    def expect(self, ok, problem):
        self.made += 1
        if not ok:
            self.problems.append(problem)
        return ok


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


# ---- retryd's text-format config, as far as these checks need it ------------

def textproto_fields(text):
    """Field path -> list of values (strings, unquoted) of a text-format
    message. Handles nesting `name { ... }`, `name: value` and comments;
    enough for the configs under deploy/."""
    text = re.sub(r"#[^\n]*", "", text)
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"]+', text)
    fields, path, i = {}, [], 0
    while i < len(tokens):
        token = tokens[i]
        if token == "}":
            path.pop()
            i += 1
        elif i + 1 < len(tokens) and tokens[i + 1] == "{":
            path.append(token)
            i += 2
        elif i + 2 < len(tokens) and tokens[i + 1] == ":" and tokens[i + 2] == "{":
            path.append(token)
            i += 3
        elif i + 2 < len(tokens) and tokens[i + 1] == ":":
            value = tokens[i + 2]
            if value.startswith('"'):
                value = value[1:-1]
            fields.setdefault(".".join(path + [token]), []).append(value)
            i += 3
        else:
            raise ValueError("cannot read the config near %r" % " ".join(tokens[i:i + 4]))
    return fields


def proto_default(root, field):
    """The (bounds) default_value of a top-level Config field in config.proto."""
    proto = read(root, "proto/retryd/v1/config.proto")
    match = re.search(r"\b%s = \d+ \[\(bounds\) = \{ default_value: (\d+)" % field, proto)
    if not match:
        raise ValueError("config.proto declares no default for " + field)
    return int(match.group(1))


def drain_bound_s(root, config_fields):
    """How long a graceful stop of retryd on this config may take, in s."""
    values = config_fields.get("shutdown_timeout_ms")
    timeout_ms = int(values[-1]) if values else proto_default(root, "shutdown_timeout_ms")
    return timeout_ms / 1000 + STOP_SLACK_S


def port_of(address):
    return int(address.rsplit(":", 1)[1]) if address and ":" in address else None


# ---- the Dockerfile -----------------------------------------------------------

def dockerfile_stages(text):
    """The Dockerfile's instructions, continuation lines joined, per stage."""
    text = re.sub(r"\\\n", " ", text)
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((keyword.upper(), rest.strip()))
    return stages


def apt_installed(instructions):
    packages = set()
    for keyword, rest in instructions:
        if keyword != "RUN":
            continue
        for command in re.split(r"&&|;", rest):
            words = shlex.split(command)
            if "apt-get" in words and "install" in words:
                after = words[words.index("install") + 1:]
                packages |= {w for w in after if not w.startswith("-")}
    return packages


def setup_runtime_packages(root):
    text = read(root, "scripts/setup.sh")
    match = re.search(r"^RUNTIME_PACKAGES=\((.*?)^\)", text, re.S | re.M)
    if not match:
        return None
    body = re.sub(r"#[^\n]*", "", match.group(1))
    return set(body.split())


# ---- the checks ---------------------------------------------------------------

def check(root):
    c = Checks()
    deploy = os.path.join(root, "deploy")

    # Every YAML parses.
    documents = {}
    for directory, _, names in os.walk(deploy):
        for name in sorted(names):
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.relpath(os.path.join(directory, name), root)
            try:
                documents[path] = [d for d in yaml.safe_load_all(read(root, path)) if d]
                c.expect(True, "")
            except yaml.YAMLError as e:
                c.expect(False, "%s does not parse: %s" % (path, str(e).replace("\n", " ")))
    c.expect(len(documents) >= 5, "found only %d YAML files under deploy/" % len(documents))

    def kind(kind_name):
        return [d for docs in documents.values() for d in docs
                if isinstance(d, dict) and d.get("kind") == kind_name]

    # The image.
    stages = dockerfile_stages(read(root, "deploy/Dockerfile"))
    runtime = stages[-1] if stages else []
    wanted = setup_runtime_packages(root)
    c.expect(wanted, "scripts/setup.sh has no RUNTIME_PACKAGES list")
    installed = apt_installed(runtime)
    c.expect(wanted is not None and installed == wanted,
             "deploy/Dockerfile's runtime stage installs %s, scripts/setup.sh's RUNTIME_PACKAGES "
             "says %s" % (sorted(installed), sorted(wanted or [])))
    users = [rest for keyword, rest in runtime if keyword == "USER"]
    uid = users[-1].split(":")[0] if users else None
    c.expect(uid is not None and uid.isdigit() and int(uid) != 0,
             "deploy/Dockerfile: the runtime stage needs a numeric non-root USER (Kubernetes' "
             "runAsNonRoot checks numbers), got %r" % uid)
    entrypoint = [rest for keyword, rest in runtime if keyword == "ENTRYPOINT"]
    config_path = None
    if c.expect(entrypoint, "deploy/Dockerfile has no ENTRYPOINT"):
        args = json.loads(entrypoint[-1])
        if c.expect("--config" in args[:-1], "deploy/Dockerfile's ENTRYPOINT passes no --config"):
            config_path = args[args.index("--config") + 1]

    # Kubernetes: the config the manifest mounts.
    maps = {m["metadata"]["name"]: m for m in kind("ConfigMap")}
    deployments = kind("Deployment")
    if not c.expect(len(deployments) == 1, "want one Deployment under deploy/k8s, found %d" %
                    len(deployments)):
        return c
    deployment = deployments[0]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    mounted_config = None
    for mount in container.get("volumeMounts", []):
        volume = next((v for v in pod.get("volumes", []) if v["name"] == mount["name"]), {})
        config_map = maps.get(volume.get("configMap", {}).get("name"))
        if config_map is None:
            continue
        for key, text in config_map.get("data", {}).items():
            path = mount["mountPath"].rstrip("/") + "/" + key
            if path == config_path:
                mounted_config = textproto_fields(text)
    c.expect(mounted_config is not None,
             "deploy/k8s: no ConfigMap key is mounted at %s, where the Dockerfile's ENTRYPOINT "
             "reads the config" % config_path)
    mounted_config = mounted_config or {}

    # Non-root, as the image's user.
    security = pod.get("securityContext", {})
    c.expect(security.get("runAsNonRoot") is True,
             "deploy/k8s/deployment.yaml: the pod's securityContext must set runAsNonRoot: true")
    c.expect(str(security.get("runAsUser")) == uid,
             "deploy/k8s/deployment.yaml: runAsUser %r is not the Dockerfile's USER %r" %
             (security.get("runAsUser"), uid))
    c.expect(container.get("securityContext", {}).get("allowPrivilegeEscalation") is False,
             "deploy/k8s/deployment.yaml: the container must set allowPrivilegeEscalation: false")

    # Probes: grpc, on the health-only listener, the right service names.
    health_address = (mounted_config.get("control.health_listen_address") or [None])[-1]
    health_port = port_of(health_address)
    c.expect(health_port, "the mounted config sets no control.health_listen_address: the probes "
             "need the plaintext health-only listener")
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports", [])}
    c.expect(ports.get("health") == health_port,
             "deploy/k8s/deployment.yaml: containerPort `health` is %r, the config's "
             "control.health_listen_address port is %r" % (ports.get("health"), health_port))
    c.expect(health_port != port_of((mounted_config.get("listen_address") or [None])[-1]),
             "the health-only listener must not be the control port")
    want_service = {"livenessProbe": LIVENESS, "readinessProbe": READINESS,
                    "startupProbe": LIVENESS}
    for probe_name in ("livenessProbe", "readinessProbe"):
        c.expect(probe_name in container, "deploy/k8s/deployment.yaml has no " + probe_name)
    for probe_name, service in want_service.items():
        probe = container.get(probe_name)
        if probe is None:
            continue
        grpc = probe.get("grpc")
        if not c.expect(isinstance(grpc, dict), "%s must be a grpc: probe" % probe_name):
            continue
        c.expect(grpc.get("port") == health_port,
                 "%s asks port %r, not the health-only listener's %r" %
                 (probe_name, grpc.get("port"), health_port))
        c.expect(grpc.get("service") == service,
                 "%s asks service %r, want %r" % (probe_name, grpc.get("service"), service))
    for docs in documents.values():
        for d in docs:
            c.expect(DOWNSTREAM not in json.dumps(d),
                     "a manifest asks %s: a downstream outage would take every pod out"
                     % DOWNSTREAM)

    # Termination grace against the mounted config's drain bound.
    grace = pod.get("terminationGracePeriodSeconds", 30)
    bound = drain_bound_s(root, mounted_config)
    c.expect(grace > bound, "deploy/k8s/deployment.yaml: terminationGracePeriodSeconds %s does "
             "not exceed shutdown_timeout_ms / 1000 + %d = %g" % (grace, STOP_SLACK_S, bound))

    # Downward API.
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in container.get("env", [])}
    c.expect(env.get("POD_NAME") == "metadata.name",
             "deploy/k8s/deployment.yaml: POD_NAME must come from fieldRef metadata.name")
    c.expect(env.get("POD_NAMESPACE") == "metadata.namespace",
             "deploy/k8s/deployment.yaml: POD_NAMESPACE must come from fieldRef "
             "metadata.namespace")

    # PodDisruptionBudget.
    budgets = kind("PodDisruptionBudget")
    if c.expect(budgets, "deploy/k8s has no PodDisruptionBudget"):
        budget = budgets[0]["spec"]
        c.expect(budget.get("selector", {}).get("matchLabels") ==
                 spec["selector"]["matchLabels"],
                 "the PodDisruptionBudget's selector is not the Deployment's")
        replicas = spec.get("replicas", 1)
        lets_one_go = (budget.get("maxUnavailable", 0) not in (0, "0%") or
                       ("minAvailable" in budget and isinstance(budget["minAvailable"], int) and
                        budget["minAvailable"] < replicas))
        c.expect(lets_one_go, "the PodDisruptionBudget lets no pod go: a node drain would hang")

    # Compose.
    compose = (documents.get("deploy/docker-compose.yml") or [{}])[0]
    services = compose.get("services", {})
    kafka_version = re.search(r"^KAFKA_VERSION=(\S+)", read(root, "scripts/kafka.sh"), re.M)
    images = [s.get("image", "") for s in services.values()
              if s.get("image", "").startswith("apache/kafka:")]
    c.expect(images, "deploy/docker-compose.yml runs no apache/kafka image")
    for image in images:
        c.expect(kafka_version and image == "apache/kafka:" + kafka_version.group(1),
                 "deploy/docker-compose.yml runs %s, the tests pin Kafka %s (scripts/kafka.sh)"
                 % (image, kafka_version.group(1) if kafka_version else "?"))
    retryd = services.get("retryd", {})
    compose_config = None
    for volume in retryd.get("volumes", []):
        source, _, target = volume.partition(":")
        target = target.split(":")[0]
        if target == config_path:
            path = os.path.normpath(os.path.join("deploy", source))
            compose_config = textproto_fields(read(root, path))
    c.expect(compose_config is not None, "deploy/docker-compose.yml mounts no config at %s" %
             config_path)
    compose_config = compose_config or {}
    created = set()
    for service in services.values():
        for command in service.get("command", []) or []:
            for loop in re.findall(r"for t in ([^;]+);", str(command)):
                created |= set(loop.split())
    named = set()
    for field in ("input_topics", "output_topic", "dead_letter_topic", "retry.topic"):
        named |= set(compose_config.get(field, []))
    c.expect(created and created == named,
             "deploy/docker-compose.yml creates the topics %s, its config names %s" %
             (sorted(created), sorted(named)))
    docs = read(root, "docs/deploying.md")
    section = re.search(r"^### Docker Compose\n(.*?)(?=^##+ )", docs, re.S | re.M)
    listed = set()
    if section:
        sentence = re.search(r"creates the topics ((?:`[^`]+`(?:,? and |, )?)+)",
                             section.group(1).replace("\n", " "))
        if sentence:
            listed = set(re.findall(r"`([^`]+)`", sentence.group(1)))
    c.expect(listed == created,
             "docs/deploying.md (Docker Compose) says the compose file creates %s; it creates %s"
             % (sorted(listed), sorted(created)))
    stop = str(retryd.get("stop_grace_period", "10s"))
    stop_s = float(stop[:-1]) if stop.endswith("s") else float(stop)
    bound = drain_bound_s(root, compose_config)
    c.expect(stop_s > bound, "deploy/docker-compose.yml: stop_grace_period %s does not exceed "
             "the drain bound %gs" % (stop, bound))

    # The systemd unit: the same config path, a grace beyond the default
    # config's drain bound.
    unit = read(root, "deploy/systemd/retryd.service")
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M)
    c.expect(exec_start and "--config %s" % config_path in exec_start.group(1),
             "deploy/systemd/retryd.service does not read the config at %s" % config_path)
    timeout = re.search(r"^TimeoutStopSec=(\d+)s?$", unit, re.M)
    bound = drain_bound_s(root, {})
    c.expect(timeout and int(timeout.group(1)) > bound,
             "deploy/systemd/retryd.service: TimeoutStopSec must exceed the default config's "
             "drain bound %gs" % bound)
    return c


# ---- the self-test ------------------------------------------------------------

def edit(path, old, new, count=1):
    def apply(root):
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        if old not in text:
            raise AssertionError("self-test: %r is not in %s" % (old, path))
        with open(full, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, count))
    return apply


def remove(path):
    return lambda root: os.remove(os.path.join(root, path))


DEPLOYMENT = "deploy/k8s/deployment.yaml"
# Each: a name, how to break a copy, and what the failure must say.
BREAKAGES = [
    ("runtime package missing", edit("deploy/Dockerfile", "libprotobuf32 ", ""),
     "RUNTIME_PACKAGES"),
    ("YAML broken", edit(DEPLOYMENT, "spec:\n", "spec: [\n"), "does not parse"),
    ("liveness on downstream", edit(DEPLOYMENT, "service: retryd.liveness", "service: "
                                    "retryd.downstream", 2), "livenessProbe asks service"),
    ("readiness on overall", edit(DEPLOYMENT, "service: retryd.readiness", 'service: ""'),
     "readinessProbe asks service"),
    ("probe on the control port", edit(DEPLOYMENT, "port: 50052", "port: 50051"),
     "not the health-only listener"),
    ("httpGet probe", edit(DEPLOYMENT, "grpc:\n              port: 50052\n              "
                           "service: retryd.readiness", "httpGet:\n              port: 50052"),
     "readinessProbe must be a grpc: probe"),
    ("config mounted elsewhere", edit(DEPLOYMENT, "mountPath: /etc/retryd\n",
                                      "mountPath: /etc/retryd-config\n"), "no ConfigMap key"),
    ("root image", edit("deploy/Dockerfile", "USER 10001:10001", "USER root"), "non-root USER"),
    ("runAsNonRoot off", edit(DEPLOYMENT, "runAsNonRoot: true", "runAsNonRoot: false"),
     "runAsNonRoot"),
    ("compose Kafka version", edit("deploy/docker-compose.yml", "apache/kafka:4.1.2",
                                   "apache/kafka:4.0.0"), "the tests pin Kafka"),
    ("compose topic missing", edit("deploy/docker-compose.yml", " orders.done;", ";"),
     "creates the topics"),
    ("docs topic list", edit("docs/deploying.md", "and `orders.done`", "and `orders.out`"),
     "docs/deploying.md (Docker Compose)"),
    ("short grace", edit(DEPLOYMENT, "terminationGracePeriodSeconds: 45",
                         "terminationGracePeriodSeconds: 35"), "terminationGracePeriodSeconds"),
    ("long shutdown", edit("deploy/k8s/configmap.yaml", '    group_id: "orders-processor"',
                           '    shutdown_timeout_ms: 60000\n    group_id: "orders-processor"'),
     "terminationGracePeriodSeconds"),
    ("short compose grace", edit("deploy/docker-compose.yml", "stop_grace_period: 45s",
                                 "stop_grace_period: 30s"), "stop_grace_period"),
    ("short systemd grace", edit("deploy/systemd/retryd.service", "TimeoutStopSec=45",
                                 "TimeoutStopSec=20"), "TimeoutStopSec"),
    ("no health listener", edit("deploy/k8s/configmap.yaml", "health_listen_address",
                                "# health_listen_address"), "control.health_listen_address"),
    ("no PodDisruptionBudget", remove("deploy/k8s/pdb.yaml"), "no PodDisruptionBudget"),
    ("PDB selects others", edit("deploy/k8s/pdb.yaml",
                                "matchLabels:\n      app.kubernetes.io/name: retryd",
                                "matchLabels:\n      app.kubernetes.io/name: other"), "selector"),
    ("PDB blocks drains", edit("deploy/k8s/pdb.yaml", "maxUnavailable: 1", "maxUnavailable: 0"),
     "lets no pod go"),
    ("no POD_NAME", edit(DEPLOYMENT, "name: POD_NAME", "name: POD"), "POD_NAME"),
]


def copy_tree(root, into):
    for path in FILES:
        source, target = os.path.join(root, path), os.path.join(into, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(source):
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)


def self_test(root):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        pristine = os.path.join(tmp, "pristine")
        copy_tree(root, pristine)
        result = check(pristine)
        if result.problems:
            failures.append("the pristine copy fails: " + "; ".join(result.problems))
        if result.made < MIN_CHECKS:
            failures.append("only %d checks made on the pristine copy, want %d at least" %
                            (result.made, MIN_CHECKS))
        for i, (name, breakage, expected) in enumerate(BREAKAGES):
            broken = os.path.join(tmp, "broken-%d" % i)
            copy_tree(root, broken)
            try:
                breakage(broken)
                problems = check(broken).problems
            except AssertionError as e:
                failures.append("%s: %s" % (name, e))
                continue
            except Exception as e:  # A crash is a way to fail too, but not the wanted one.
                problems = ["crashed: %r" % e]
            if not any(expected in p for p in problems):
                failures.append("%s: not caught as %r (problems: %s)" %
                                (name, expected, "; ".join(problems) or "none"))
    for failure in failures:
        print("check_deploy self-test: " + failure)
    if not failures:
        print("check_deploy self-test: the pristine copy passes %d checks; %d broken copies "
              "are each caught" % (result.made, len(BREAKAGES)))
    return 1 if failures else 0


# ---- systemd ------------------------------------------------------------------

def verify_unit(root, binary):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return missing_tool([("systemd-analyze", "Debian package systemd")],
                            say=lambda text: print("check_deploy: " + text))
    if not os.access(binary, os.X_OK):
        # A build that runs some labels builds only their test binaries (the
        # TSan job: scripts/tsan.sh builds no retryd); the builds that build
        # everything judge the unit.
        print("check_deploy: skipped: %s is not built in this build directory" % binary)
        return SKIPPED
    unit = read(root, "deploy/systemd/retryd.service")
    exec_start = re.search(r"^ExecStart=(\S+)", unit, re.M)
    if not exec_start:
        print("check_deploy: deploy/systemd/retryd.service has no ExecStart")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "retryd.service")
        with open(path, "w", encoding="utf-8") as f:
            f.write(unit.replace("ExecStart=" + exec_start.group(1),
                                 "ExecStart=" + os.path.abspath(binary), 1))
        run = subprocess.run([tool, "verify", "--man=no", path], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
    output = run.stdout.strip()
    if run.returncode != 0 or output:
        print("check_deploy: systemd-analyze verify retryd.service (exit %d):\n%s" %
              (run.returncode, output))
        return 1
    print("check_deploy: systemd-analyze verify passes deploy/systemd/retryd.service")
    return 0


def main(argv):
    args = argv[1:]
    if args[:1] == ["--self-test"]:
        return self_test(os.path.abspath(args[1] if len(args) > 1 else default_root()))
    if args[:1] == ["--systemd-unit"] and len(args) >= 2:
        return verify_unit(os.path.abspath(args[2] if len(args) > 2 else default_root()), args[1])
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(__doc__)
        return 2
    result = check(os.path.abspath(args[0] if args else default_root()))
    for problem in result.problems:
        print("check_deploy: " + problem)
    if result.problems:
        return 1
    print("check_deploy: %d checks pass" % result.made)
    return 0


def default_root():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
