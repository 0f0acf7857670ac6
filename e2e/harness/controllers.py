"""The JobSet and Kueue controllers: their charts rendered and applied as Helm would, their managers run here.

A stack's Helm release (chart, version, namespace, values, as the program
declares it) is rendered by helm-render (Helm's own engine, e2e/tools/helm)
from the chart in the same module zip the manager is built from; the
release's version must be that chart's. Everything the chart renders is
applied, in Helm's install order, with three changes that running outside a
cluster needs (e2e/README.md, "Webhooks"):

- every webhook's and CRD conversion webhook's `clientConfig.service` becomes
  `url: https://127.0.0.1:<port><path>` with the harness CA as `caBundle`:
  the apiserver can't reach a Service here (a Service's Endpoints may not
  be a loopback address), while a `url` may name one;
- the manager runs as a process of this machine with the chart's own
  configuration (its ConfigMap's controller_manager_config.yaml) and the
  container's own arguments, plus what a process outside a pod needs:
  internal certificate management off (its rotator writes certificates for
  the Service's DNS name, which a `url` of 127.0.0.1 can't use; it is the
  charts' cert-manager path, a certificate given in `webhook.certDir`),
  listeners on free ports of 127.0.0.1, no leader election (one process),
  the credentials of the chart's ServiceAccount (a TokenRequest), so the
  chart's RBAC is what it runs with;
- Kueue's visibility APIService is left out and its VisibilityOnDemand
  feature (beta, on by default) turned off: the aggregated API is served
  through a Service too, and it reads its certificate from /visibility.

The chart's Deployment is applied too: its pod is scheduled like any other
and kwok runs it, so it shows that the controller fits the system pool.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from e2e.harness.apply import apply_all
from e2e.harness.cluster import LOCALHOST, ControlPlane, free_port
from e2e.harness.kube import Kube, wait_for
from e2e.harness.tools import KUBE_VERSION

MANAGER_CONFIG_KEY = "controller_manager_config.yaml"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
LEFT_OUT_KINDS = {"APIService": "served through a Service, which the apiserver can't reach here"}
# The manager binary built for each chart (e2e/tools/<tool>/recipe OUTPUT_NAMES).
MANAGERS = {"jobset": "jobset-manager", "kueue": "kueue-manager"}
READY_TIMEOUT = 180.0
TOKEN_SECONDS = 2 * 24 * 3600


@dataclass
class Release:
    name: str
    chart: str
    version: str
    namespace: str
    values: dict
    objects: list[dict]
    left_out: list[str]


def chart_name(release_inputs: dict) -> str:
    return release_inputs["chart"].rstrip("/").rsplit("/", 1)[-1]


def render(cp: ControlPlane, release_inputs: dict) -> Release:
    name = chart_name(release_inputs)
    chart_dir = cp.tools.chart(name)
    chart_version = yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"]
    # A stack's local chart directory (`charts: {dir: ...}`) names no version: its Chart.yaml's is installed.
    if release_inputs.get("version") is not None and str(release_inputs["version"]) != str(chart_version):
        raise RuntimeError(f"e2e: release {release_inputs['name']!r} asks for chart version "
                           f"{release_inputs['version']!r}; the built chart is {chart_version!r} ({chart_dir})")
    values_file = cp.state / f"{release_inputs['name']}-values.json"
    values = release_inputs.get("values") or {}
    values_file.write_text(json.dumps(values))
    namespace = release_inputs.get("namespace", "default")
    out = subprocess.run([str(cp.tools.bin("helm-render")), "--chart", str(chart_dir), "--values", str(values_file),
                          "--name", release_inputs["name"], "--namespace", namespace,
                          "--kube-version", KUBE_VERSION], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"e2e: rendering chart {name}: {out.stderr.strip()}")
    objects, left_out = [], []
    for doc in yaml.safe_load_all(out.stdout):
        if not doc:
            continue
        if doc["kind"] in LEFT_OUT_KINDS:
            left_out.append(f"{doc['kind']}/{doc['metadata']['name']}: {LEFT_OUT_KINDS[doc['kind']]}")
            continue
        objects.append(doc)
    return Release(release_inputs["name"], name, str(chart_version), namespace, values, objects, left_out)


def _url_client_config(client_config: dict, port: int, ca_bundle: str) -> dict:
    service = client_config.get("service")
    if not service:
        return client_config
    return {"url": f"https://{LOCALHOST}:{port}{service.get('path', '/')}", "caBundle": ca_bundle}


def localize(objects: list[dict], namespace: str, webhook_port: int, ca_bundle: str) -> list[dict]:
    """The chart's objects as applied here: namespaces filled in, webhooks called by url."""
    out = []
    for original in objects:
        obj = copy.deepcopy(original)
        if obj["kind"] in WEBHOOK_KINDS:
            for hook in obj.get("webhooks", []):
                hook["clientConfig"] = _url_client_config(hook["clientConfig"], webhook_port, ca_bundle)
        if obj["kind"] == "CustomResourceDefinition":
            webhook = ((obj["spec"].get("conversion") or {}).get("webhook") or {})
            if "clientConfig" in webhook:
                webhook["clientConfig"] = _url_client_config(webhook["clientConfig"], webhook_port, ca_bundle)
        out.append(obj)
    return out


def manager_config(objects: list[dict], namespace: str, ports: dict[str, int], cert_dir: Path,
                   chart: str) -> dict:
    """The chart's manager configuration, as a process outside a pod runs it (module docstring)."""
    maps = [o for o in objects if o["kind"] == "ConfigMap" and MANAGER_CONFIG_KEY in (o.get("data") or {})]
    if len(maps) != 1:
        raise RuntimeError(f"e2e: chart {chart} renders {len(maps)} ConfigMaps with {MANAGER_CONFIG_KEY}")
    config = yaml.safe_load(maps[0]["data"][MANAGER_CONFIG_KEY])
    config.setdefault("internalCertManagement", {})["enable"] = False
    config["webhook"] = {**(config.get("webhook") or {}), "port": ports["webhook"], "host": LOCALHOST,
                         "certDir": str(cert_dir)}
    config["health"] = {**(config.get("health") or {}), "healthProbeBindAddress": f"{LOCALHOST}:{ports['health']}"}
    config["metrics"] = {**(config.get("metrics") or {}), "bindAddress": "0"}  # "0": no metrics server
    config["leaderElection"] = {**(config.get("leaderElection") or {}), "leaderElect": False}
    if chart == "kueue":
        config["namespace"] = namespace
        config.setdefault("featureGates", {})["VisibilityOnDemand"] = False
    return config


def _manager_container(objects: list[dict], chart: str) -> tuple[dict, dict]:
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    if len(deployments) != 1:
        raise RuntimeError(f"e2e: chart {chart} renders {len(deployments)} Deployments; expected the manager's")
    spec = deployments[0]["spec"]["template"]["spec"]
    return deployments[0], spec["containers"][0]


def _token_kubeconfig(cp: ControlPlane, kube: Kube, namespace: str, account: str) -> Path:
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
    token = kube.request("POST", path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                        "spec": {"expirationSeconds": TOKEN_SECONDS}})["status"]["token"]
    return cp.write_kubeconfig(cp.state / f"{account}.kubeconfig", token, account)


def _manager_args(container: dict, config_file: Path, kubeconfig: Path) -> list[str]:
    """The container's own arguments, its --config pointing at the local file, and --kubeconfig."""
    args = [a for a in container.get("args", []) if not a.startswith("--config")]
    return [*args, f"--config={config_file}", f"--kubeconfig={kubeconfig}"]


# Kueue 0.19.2 with its internal certificate management off reads its metrics
# certificate from this fixed path and exits when it is missing
# (cmd/kueue/main.go, metricsCertPath), even with the metrics server off.
KUEUE_METRICS_CERT_DIR = "/etc/kueue/metrics/certs"


def _with_metrics_certs(cp: ControlPlane, argv: list[str], cert_dir: Path) -> list[str]:
    """The manager in a mount namespace of its own where /etc is an overlay holding the harness's
    certificate at Kueue's fixed path: nothing is written to the machine's /etc."""
    upper, work = cp.state / "kueue-etc" / "upper", cp.state / "kueue-etc" / "work"
    upper.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
              f" && mkdir -p {KUEUE_METRICS_CERT_DIR}"
              f" && cp {cert_dir}/tls.crt {cert_dir}/tls.key {KUEUE_METRICS_CERT_DIR}/"
              ' && exec "$0" "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, *argv]


def manager_ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOCALHOST}:{port}/readyz", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


@dataclass
class Localized:
    """A release's objects as they are applied here, and what its manager process runs with."""

    release: Release
    objects: list[dict]
    ports: dict[str, int]
    cert_dir: Path


def localized(cp: ControlPlane, release_inputs: dict) -> Localized:
    """The release rendered, its webhooks called by url on ports of its own (module docstring)."""
    release = render(cp, release_inputs)
    ports = {"webhook": free_port(), "health": free_port()}
    cp.ports[f"{MANAGERS[release.chart]}-health"] = ports["health"]  # awaited after a restart (faults.py)
    cert, _ = cp.pki.serving_pair(f"{release.chart}-webhook")
    ca_bundle = base64.b64encode(cp.pki.ca_cert.read_bytes()).decode()
    objects = localize(release.objects, release.namespace, ports["webhook"], ca_bundle)
    return Localized(release, objects, ports, cert.parent)


def install(cp: ControlPlane, kube: Kube, release_inputs: dict) -> Release:
    """Render, apply and run one controller release; return once its webhooks answer and it's Available."""
    local = localized(cp, release_inputs)
    if release_inputs.get("createNamespace"):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": local.release.namespace}})
    for obj in local.objects:
        obj["metadata"].setdefault("namespace", local.release.namespace)
    apply_all(kube, local.objects)
    start_manager(cp, kube, local)
    return local.release


def start_manager(cp: ControlPlane, kube: Kube, local: Localized) -> None:
    """The release's manager as a process of this machine, once its objects are in the cluster (applied by
    `install`, or by the engine's Helm release: `chart_for_engine`); returns once its webhooks answer and
    its Deployment is Available."""
    release = local.release
    deployment, container = _manager_container(local.objects, release.chart)
    config_file = cp.state / f"{release.chart}-manager-config.yaml"
    config_file.write_text(yaml.safe_dump(manager_config(local.objects, release.namespace, local.ports,
                                                         local.cert_dir, release.chart)))
    account = deployment["spec"]["template"]["spec"].get("serviceAccountName", "default")
    kubeconfig = _token_kubeconfig(cp, kube, release.namespace, account)
    argv = [str(cp.tools.bin(MANAGERS[release.chart])), *_manager_args(container, config_file, kubeconfig)]
    if release.chart == "kueue":
        argv = _with_metrics_certs(cp, argv, local.cert_dir)
    cp.supervisor.start(f"{release.chart}-manager", argv, env={"POD_NAMESPACE": release.namespace})
    wait_for(f"{release.chart} manager /readyz", lambda: manager_ready(local.ports["health"]), READY_TIMEOUT,
             explain=lambda: _tail(cp, f"{release.chart}-manager"))
    name, ns = deployment["metadata"]["name"], release.namespace
    wait_for(f"Deployment {ns}/{name} Available", lambda: _available(kube, name, ns), READY_TIMEOUT)


# A chart's template that is the release's rendered objects as they are (`.Files.Get` reads a file of the
# chart's own, outside templates/; nothing in it is evaluated as a template).
RENDERED = "rendered.yaml"
RENDERED_TEMPLATE = '{{ .Files.Get "%s" }}\n' % RENDERED


def chart_for_engine(cp: ControlPlane, release_inputs: dict, charts_dir: Path) -> Localized:
    """The release's chart as a stack's `charts: {dir: ...}` installs it here through the engine's Helm: its
    Chart.yaml and crds/ as they are, its templates replaced by one file of the objects Helm's engine renders
    with the release's values (its Kueue configuration, the stack's owner annotation), localized as
    `install` applies them. The Helm release (the provider's install, its wait, its state) is the engine's; the
    manager is started by `start_manager` once the release is installed, as a kubelet starts its container."""
    local = localized(cp, release_inputs)
    source, dest = cp.tools.chart(local.release.chart), charts_dir / local.release.chart
    (dest / "templates").mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / "Chart.yaml", dest / "Chart.yaml")
    kept: set[str] = set()
    if (source / "crds").is_dir():  # Helm installs crds/ before the templates and never deletes them
        shutil.copytree(source / "crds", dest / "crds", dirs_exist_ok=True)
        kept = {d["metadata"]["name"] for f in (source / "crds").glob("*.yaml") for d in yaml.safe_load_all(
            f.read_text()) if d}
    objects = [o for o in local.objects if not (o["kind"] == "CustomResourceDefinition"
                                                and o["metadata"]["name"] in kept)]
    (dest / RENDERED).write_text(yaml.safe_dump_all(objects, sort_keys=False))
    (dest / "templates" / RENDERED).write_text(RENDERED_TEMPLATE)
    return local


def _available(kube: Kube, name: str, namespace: str) -> bool:
    status = kube.get("apps/v1", "Deployment", name, namespace).get("status", {})
    return any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions") or [])


def _tail(cp: ControlPlane, name: str) -> str:
    cp.supervisor.check_running()
    return cp.supervisor.log_tail(name)
