"""The JobSet and Kueue controllers as the stack installs them: their Helm values and what the
control plane must reach on their pods.

Both controllers admit objects through webhooks with `failurePolicy: Fail`
served from their pods, and Kueue also serves its visibility API
(an APIService the kube-apiserver aggregates). On a cluster with private
nodes GKE's own firewall rule lets the control plane reach nodes on 443 and
10250 only, so the stack opens exactly these ports (components/firewall.py);
a webhook the control plane can't reach fails every object it admits.
https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules

Kueue is limited to what the platform owns (DESIGN.md invariant 13): the
JobSet integration only, and the runs' namespace only. With the chart's
defaults it manages Jobs, pods, Deployments, StatefulSets and more in every
namespace but kube-system and its own, behind `failurePolicy: Fail`
webhooks: while Kueue is down nothing of those kinds could be created
anywhere, JobSet's own controller and the staging Jobs included. The chart
scopes every job webhook's namespaceSelector by the configuration's
`managedJobsNamespaceSelector` (v0.19.2 charts/kueue/templates/webhook/manifests.yaml)
and makes the pod, Deployment and StatefulSet webhooks `Ignore` when their
framework is off; the manager answers a disabled framework's webhook with a
no-op (pkg/controller/jobframework/setup.go, WithNoopWebhook).
"""

from __future__ import annotations

import yaml

from stack.existing import Charts
from stack.sharing import REQUEUE_BACKOFF_MAX_SECONDS, KueueSettings

# JobSet v0.12.0 serves its webhook on this container port, fixed in its chart
# (charts/jobset/templates/controller/deployment.yaml: containerPort 9443, the
# Service's targetPort `webhook`).
JOBSET_WEBHOOK_PORT = 9443
# Kueue v0.19.2: the webhook port is the configuration's `webhook.port`, which
# the stack sets below; the visibility server's port is fixed by the chart
# (charts/kueue/templates/visibility/service.yaml, targetPort 8082).
KUEUE_WEBHOOK_PORT = 9443
KUEUE_VISIBILITY_PORT = 8082

# The one Kueue integration the runs use: their JobSets.
KUEUE_FRAMEWORKS = ("jobset.x-k8s.io/jobset",)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


def kueue_manager_config(namespace: str, settings: KueueSettings = KueueSettings()) -> dict:
    """Kueue's controller configuration (config.kueue.x-k8s.io/v1beta2): the chart's defaults
    (v0.19.2 charts/kueue/values.yaml, managerConfig.controllerManagerConfigYaml), scoped to the runs'
    namespace, and the other teams' namespaces the stack names (`kueue.managedNamespaces`: their stacks use this
    Kueue with `existingCluster.controllers: existing`); jobs anywhere else are none of its business."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": KUEUE_WEBHOOK_PORT},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
        }},
        "clientConnection": {"qps": 300, "burst": 500},
        "managedJobsNamespaceSelector": managed_namespaces_selector(namespace, settings.managed_namespaces),
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "waitForPodsReady": wait_for_pods_ready(settings),
    }


def managed_namespaces_selector(namespace: str, others: tuple[str, ...] = ()) -> dict:
    """The namespaces whose jobs Kueue manages: the stack's, and the other teams' it names (`kueue.managedNamespaces`),
    by the name label the API server sets on every namespace."""
    if not others:
        return {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}
    names = list(dict.fromkeys((namespace, *others)))
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": names}]}


def wait_for_pods_ready(settings: KueueSettings) -> dict:
    """All-or-nothing admission: an admitted run whose pods are not all ready within the timeout (its nodes
    never came: a pool another stack filled, a stock-out) is evicted, its quota released, and requeued after
    an exponential backoff (`backoffBaseSeconds` * 2^(n-1), at most `backoffMaxSeconds`), at most
    `backoffLimitCount` times before it is deactivated. The time counts from the eviction, so a requeued run
    goes behind the runs that waited meanwhile. Kueue v0.19.2 config API v1beta2 (apis/config/v1beta2/
    configuration_types.go `WaitForPodsReady`, `RequeuingStrategy`; present means enabled, there is no
    `enable` in v1beta2); https://kueue.sigs.k8s.io/docs/tasks/manage/setup_wait_for_pods_ready/."""
    return {
        "timeout": f"{settings.pods_ready_timeout_seconds}s",
        "blockAdmission": False,  # other runs are admitted meanwhile (several pools, several rungs)
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffLimitCount": settings.requeue_limit,
            "backoffBaseSeconds": settings.requeue_backoff_seconds,
            "backoffMaxSeconds": max(REQUEUE_BACKOFF_MAX_SECONDS, settings.requeue_backoff_seconds),
        },
    }


def kueue_chart_values(namespace: str, settings: KueueSettings = KueueSettings()) -> dict:
    """The Helm values the stack installs Kueue's chart with, managing the jobs of `namespace`."""
    config = yaml.safe_dump(kueue_manager_config(namespace, settings), sort_keys=False)
    return {"managerConfig": {"controllerManagerConfigYaml": config}}


def webhook_ports(kueue: bool) -> tuple[int, ...]:
    """The ports the control plane must reach on the controllers' pods: JobSet's, and Kueue's
    where the stack installs it."""
    ports = {JOBSET_WEBHOOK_PORT}
    if kueue:
        ports |= {KUEUE_WEBHOOK_PORT, KUEUE_VISIBILITY_PORT}
    return tuple(sorted(ports))


def chart_source(chart: str, version: str, charts: Charts) -> dict:
    """Where a controller's chart (its upstream `oci://.../<name>` reference and pinned version) comes from,
    as the Helm Release's `chart`, `version` and `repository_opts`.

    A local chart directory is a `chart` path, installed as it is, its own
    Chart.yaml naming its version, so none is given ("a path to an unpacked
    chart directory": https://helm.sh/docs/helm/helm_install/, read 2026-12-02;
    the Pulumi Release's "Local Chart Directory" example sets `chart` alone:
    https://www.pulumi.com/registry/packages/kubernetes/api-docs/helm/v3/release/, read 2026-12-02).
    An OCI mirror serves the chart under its own path (`oci://<mirror>/<name>`)
    and an https Helm repository by name through `repositoryOpts.repo`, both at
    the pinned version.
    """
    name = chart.rstrip("/").rsplit("/", 1)[-1]
    if charts.dir:
        return {"chart": f"{charts.dir.rstrip('/')}/{name}", "version": None, "repository_opts": None}
    if charts.repository and charts.repository.startswith("oci://"):
        return {"chart": f"{charts.repository.rstrip('/')}/{name}", "version": version, "repository_opts": None}
    if charts.repository:
        return {"chart": name, "version": version, "repository_opts": {"repo": charts.repository}}
    return {"chart": chart, "version": version, "repository_opts": None}
