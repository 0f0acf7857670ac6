"""Where `make status` reads from: the cluster (the `kubernetes` client, the stack's own context:
tools/status/context.py; the namespace's JobSets, Workloads, ProvisioningRequests and run pods, and the nodes'
labels) or a `kubectl get -o json` dump of it, and the progress records from the bucket (the
`google-cloud-storage` client, Application Default Credentials) or a local copy of its layout.

Objects come back as plain dicts with the API's camelCase keys, as `kubectl get -o json` prints them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from core.names import RUN_LABEL, checkpoint_prefix
from tools.status.model import ProgressError, validate_progress
from trainers import eval_report, export_dir

PROGRESS_FILE = "progress.json"  # trainers/*/progress.py FILE
# (group, version, plural) of each kind, and the kind's name in a dump.
KINDS = {
    "jobsets": ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    "workloads": ("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
    "requests": ("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest"),
}
TIMEOUT_S = 15


class ClusterUnreachable(Exception):
    """The cluster did not answer (no configuration, no route, refused, timed out, not authorized)."""


class NotDeployed(Exception):
    """The stack's namespace or its JobSet API is not there."""


def empty() -> dict[str, list]:
    return {"jobsets": [], "workloads": [], "requests": [], "pods": [], "nodes": []}


def from_dump(path: str) -> dict[str, list]:
    """The objects of a `kubectl get jobsets,workloads,provisioningrequests,pods -o json` dump."""
    items = json.loads(Path(path).read_text()).get("items", [])
    by_kind = {kind: key for key, (_, _, _, kind) in KINDS.items()} | {"Pod": "pods", "Node": "nodes"}
    out = empty()
    for item in items:
        key = by_kind.get(item.get("kind"))
        if key:
            out[key].append(item)
    return out



def kubeconfig_file(explicit: str) -> str | None:
    """The kubeconfig file (or KUBECONFIG's path list, which the client merges as kubectl does:
    KubeConfigMerger) to hand the Kubernetes client: KUBECONFIG as it is now, since the client reads
    its own default (KUBE_CONFIG_DEFAULT_LOCATION) once, when it is imported."""
    return explicit or os.environ.get("KUBECONFIG") or None

class KubeCluster:
    """The namespace's objects through the Kubernetes API."""

    def __init__(self, context: str | None = None, config_file: str = ""):
        try:
            from kubernetes import client, config  # pylint: disable=import-outside-toplevel
        except ImportError:
            raise ClusterUnreachable("the kubernetes client is not installed (requirements.txt; `make venvs`)") from None

        try:
            config.load_kube_config(config_file=kubeconfig_file(config_file), context=context)
        except (config.ConfigException, OSError) as err:
            raise ClusterUnreachable(f"no usable kubeconfig (KUBECONFIG or ~/.kube/config): {err}") from None
        self.client = client
        self.core, self.custom = client.CoreV1Api(), client.CustomObjectsApi()

    def _call(self, fn, *args, **kwargs):
        from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel
        from urllib3.exceptions import HTTPError  # pylint: disable=import-outside-toplevel

        try:
            return fn(*args, _request_timeout=TIMEOUT_S, **kwargs)
        except ApiException as err:
            if err.status == 404:
                raise  # the caller says what is missing
            if err.status in (401, 403):
                raise ClusterUnreachable(f"the API server refused the request ({err.status} {err.reason})") from None
            raise ClusterUnreachable(f"the API server answered {err.status} {err.reason}") from None
        except (HTTPError, OSError) as err:
            raise ClusterUnreachable(f"the API server did not answer: {err}") from None

    def objects(self, namespace: str) -> dict[str, list]:
        from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel

        try:
            self._call(self.core.read_namespace, namespace)
        except ApiException as err:
            if err.status == 404:
                raise NotDeployed(f"namespace {namespace!r} does not exist") from None
            raise
        out = empty()
        for key, (group, version, plural, kind) in KINDS.items():
            try:
                found = self._call(self.custom.list_namespaced_custom_object, group, version, namespace, plural)
            except ApiException as err:
                if err.status != 404:
                    raise
                if key == "jobsets":
                    raise NotDeployed(f"the {kind} API ({group}/{version}) is not installed") from None
                continue  # Kueue or its ProvisioningRequest API is not installed: no such objects
            out[key] = found.get("items", [])
        pods = self._call(self.core.list_namespaced_pod, namespace, label_selector=RUN_LABEL)
        out["pods"] = [self.client.ApiClient().sanitize_for_serialization(p) for p in pods.items]
        out["nodes"] = self._nodes()
        return out

    def _nodes(self) -> list[dict]:
        """The nodes (their labels tell a pod's rung where Kueue does not); none where listing them is not allowed."""
        try:
            nodes = self._call(self.core.list_node)
        except ClusterUnreachable:
            return []
        except self.client.exceptions.ApiException:
            return []
        return [{"metadata": {"name": n.metadata.name, "labels": n.metadata.labels or {}}} for n in nodes.items]


def _record(text: str | None, where: str) -> tuple[dict | None, str]:
    if text is None:
        return None, ""
    try:
        return validate_progress(json.loads(text)), ""
    except ValueError as err:  # bad JSON, or a ProgressError
        return None, f"{where}: {err if isinstance(err, ProgressError) else f'not JSON ({err})'}"


def checkpoint_mount(jobset: Mapping | None) -> str | None:
    """The bucket prefix a deployed run's checkpoints volume mounts (its gcsfuse `only-dir`,
    manifests/storage.py), which is where its progress record is: a run deployed before prefixes
    carried the stack keeps `checkpoints/<run>` (core/names.py). None: no such volume."""
    for replicated in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or ():
        pod = (((replicated.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for volume in pod.get("volumes") or ():
            if volume.get("name") != "checkpoints":
                continue
            options = ((volume.get("csi") or {}).get("volumeAttributes") or {}).get("mountOptions", "")
            for option in options.split(","):
                if option.startswith("only-dir="):
                    return option.removeprefix("only-dir=")
    return None


def export_state(marker_text: str | None, eval_text: str | None, where: str) -> tuple[str, str]:
    """(the export's line, eval.json's line) for `make status`, from the marker's and eval.json's text."""
    if marker_text is None:
        return f"{where}: not written yet (when training succeeds)", ""
    try:
        marker = export_dir.check_marker(json.loads(marker_text), where)
    except (ValueError, export_dir.IncompleteExport) as err:
        return f"{where}: {err}", ""
    size = sum(marker["files"].values()) / 2**30
    line = (f"{where}: complete at {marker.get('completed_at')}, step {marker.get('step')}, "
            f"{len(marker['files'])} files, {size:.2f} GiB (make download)")
    evaluated = ""
    if eval_text is not None:
        try:
            evaluated = eval_report.summary(json.loads(eval_text))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            evaluated = f"{eval_report.FILE} unreadable: {err}"
    return line, evaluated


class LocalProgress:
    """Records from a directory laid out as the bucket: <root>/checkpoints/<stack>/<run>/progress.json."""

    def __init__(self, root: str, stack: str):
        self.root, self.stack = Path(root), stack

    def export(self, prefix: str) -> tuple[str, str]:
        """The export at `prefix` (exports/<stack>/<run>) and its evaluation, as `make status` shows them."""
        base = self.root / prefix

        def text(name: str) -> str | None:
            return (base / name).read_text() if (base / name).is_file() else None

        return export_state(text(export_dir.MARKER), text(eval_report.FILE), str(base))

    def read(self, run: str, prefix: str | None = None) -> tuple[dict | None, str]:
        """`prefix`: where the run's checkpoints are (`checkpoint_mount`); default the stack's layout."""
        path = self.root / (prefix or checkpoint_prefix(self.stack, run)) / PROGRESS_FILE
        return _record(path.read_text() if path.is_file() else None, str(path))


class BucketProgress:
    """Records from the stack's bucket: gs://<bucket>/checkpoints/<stack>/<run>/progress.json."""

    def __init__(self, bucket: str, project: str, stack: str):
        self.name, self.bucket, self.problem, self.stack = bucket, None, "", stack
        try:
            from google.cloud import storage  # pylint: disable=import-outside-toplevel

            self.bucket = storage.Client(project=project).bucket(bucket)
        except Exception as err:  # pylint: disable=broad-except  # no client, no credentials: say so per run
            self.problem = f"gs://{bucket} cannot be read: {type(err).__name__}: {err}"

    def export(self, prefix: str) -> tuple[str, str]:
        where = f"gs://{self.name}/{prefix}/"
        if self.bucket is None:
            return f"{where}: {self.problem}", ""
        from google.api_core import exceptions  # pylint: disable=import-outside-toplevel

        def text(name: str) -> str | None:
            try:
                return self.bucket.blob(f"{prefix}/{name}").download_as_text(timeout=TIMEOUT_S)
            except exceptions.NotFound:
                return None

        try:
            return export_state(text(export_dir.MARKER), text(eval_report.FILE), where)
        except exceptions.GoogleAPIError as err:
            return f"{where}: {err}", ""

    def read(self, run: str, prefix: str | None = None) -> tuple[dict | None, str]:
        if self.bucket is None:
            return None, self.problem
        from google.api_core import exceptions  # pylint: disable=import-outside-toplevel

        path = f"{prefix or checkpoint_prefix(self.stack, run)}/{PROGRESS_FILE}"
        try:
            text = self.bucket.blob(path).download_as_text(timeout=TIMEOUT_S)
        except exceptions.NotFound:
            text = None
        except exceptions.GoogleAPIError as err:
            return None, f"gs://{self.name}/{path}: {err}"
        return _record(text, f"gs://{self.name}/{path}")


def owned_by(obj: Mapping, kind: str, name: str) -> bool:
    return any(o.get("kind") == kind and o.get("name") == name
               for o in (obj.get("metadata") or {}).get("ownerReferences") or ())
