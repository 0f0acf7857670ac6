"""A stack's cluster as the run commands read it: the objects `make status` reads
(tools/status/sources.py `KubeCluster`), and a run's pods, their logs, the events of its objects and
its nodes, through the Kubernetes client and the stack's own kubeconfig context.

Objects come back as plain dicts with the API's camelCase keys, as `kubectl get -o json` prints them.
A pod or log that is gone is `Gone`; a cluster that does not answer is `ClusterUnreachable`.
"""

from __future__ import annotations

from collections.abc import Iterator

from tools.status.context import check, stack_context
from tools.status.sources import KINDS, ClusterUnreachable, KubeCluster

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# Following a log is one long request, quiet while the trainer is: a connect timeout, and a read timeout
# only against a connection that died unnoticed (the follower attaches again to a pod still running).
FOLLOW_TIMEOUT = (15, 3600)


class Gone(Exception):
    """The pod (or its log) is not in the cluster any more."""


class RunCluster(KubeCluster):
    """The stack's cluster, in the stack's namespace."""

    def __init__(self, config, context: str | None = None):
        ctx = stack_context(config, context)
        check(config.stack, ctx)  # ContextMissing: the message says the command that writes the context
        super().__init__(ctx.context, ctx.kubeconfig)
        self.where = ctx.describe()
        self.namespace = config.runs_namespace

    def _plain(self, obj) -> dict:
        return self.client.ApiClient().sanitize_for_serialization(obj)

    def _missing_is_gone(self, fn, *args, **kwargs):
        from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel

        try:
            return self._call(fn, *args, **kwargs)
        except ApiException as err:  # only 404 gets here (KubeCluster._call)
            raise Gone(f"{err.status} {err.reason}") from None

    def snapshot(self) -> dict[str, list]:
        """The namespace's JobSets, Workloads, ProvisioningRequests, run pods and nodes (as `make status`)."""
        return self.objects(self.namespace)

    def jobset(self, run: str) -> dict | None:
        """The run's JobSet, or None when it is not in the cluster."""
        group, version, plural, _ = KINDS["jobsets"]
        try:
            return self._missing_is_gone(self.custom.get_namespaced_custom_object, group, version, self.namespace,
                                         plural, run)
        except Gone:
            return None

    def pods(self, run: str) -> list[dict]:
        found = self._call(self.core.list_namespaced_pod, self.namespace, label_selector=f"{JOBSET_NAME_LABEL}={run}")
        return [self._plain(p) for p in found.items]

    def log(self, pod: str, container: str, tail: int | None = None) -> str:
        kwargs = {"tail_lines": tail} if tail else {}
        return self._missing_is_gone(self.core.read_namespaced_pod_log, pod, self.namespace, container=container,
                                     **kwargs)

    def follow(self, pod: str, container: str, since_seconds: int | None = None) -> Iterator[str]:
        """The container's log lines as they come, until the container ends (or the pod is gone)."""
        from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel
        from urllib3.exceptions import HTTPError  # pylint: disable=import-outside-toplevel

        kwargs = {"since_seconds": since_seconds} if since_seconds else {}
        try:
            response = self.core.read_namespaced_pod_log(pod, self.namespace, container=container, follow=True,
                                                         _preload_content=False, _request_timeout=FOLLOW_TIMEOUT,
                                                         **kwargs)
        except ApiException as err:
            if err.status in (400, 404):  # 400: the container has not started, or its node is gone
                raise Gone(f"{err.status} {err.reason}: {err.body or ''}".strip()) from None
            raise ClusterUnreachable(f"the API server answered {err.status} {err.reason}") from None
        except (HTTPError, OSError) as err:
            raise ClusterUnreachable(f"the API server did not answer: {err}") from None
        try:
            pending = b""
            for chunk in response.stream(amt=4096, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                yield from (line.decode("utf-8", "replace") for line in lines)
            if pending:
                yield pending.decode("utf-8", "replace")
        except (HTTPError, OSError) as err:
            raise ClusterUnreachable(f"the log stream broke: {err}") from None
        finally:
            response.release_conn()

    def events(self) -> list[dict]:
        """Every event of the namespace (the run's are picked by the objects they name)."""
        return [self._plain(e) for e in self._call(self.core.list_namespaced_event, self.namespace).items]

    def jobs(self, run: str) -> list[dict]:
        from kubernetes import client  # pylint: disable=import-outside-toplevel

        found = self._call(client.BatchV1Api().list_namespaced_job, self.namespace,
                           label_selector=f"{JOBSET_NAME_LABEL}={run}")
        return [self._plain(j) for j in found.items]

    def full_nodes(self, names: set[str]) -> list[dict]:
        """The named nodes, whole (conditions, taints, allocatable); none where listing nodes is not allowed."""
        from kubernetes.client.exceptions import ApiException  # pylint: disable=import-outside-toplevel

        try:
            nodes = self._call(self.core.list_node)
        except (ClusterUnreachable, ApiException):
            return []
        return [self._plain(n) for n in nodes.items if n.metadata.name in names]


__all__ = ["ClusterUnreachable", "Gone", "KINDS", "RunCluster"]
