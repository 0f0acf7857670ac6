"""Where a person looks at a run in the Google Cloud console: its workload page and its logs.

Pure functions of the run's project, cluster, namespace and name.

- The workload page: `https://console.cloud.google.com/kubernetes/service/<location>/<cluster>/
  <namespace>/<name>/details?project=<project>`, the page xpk prints for a JobSet it submits
  ("Follow your workload here", AI-Hypercomputer/xpk src/xpk/core/workload.py, read 2026-12-04).
- The logs: Cloud Logging's Logs Explorer with a query in the URL, `https://console.cloud.google.com/
  logs/query;query=<url-encoded query>;storageScope=project;duration=<ISO 8601 duration>?project=<project>`
  (xpk src/xpk/commands/workload.py, the same form). GKE writes each container's stdout and stderr
  as `k8s_container` entries whose resource labels name the project, location, cluster, namespace,
  pod and container, with the pod's labels as `labels."k8s-pod/<key>"`, dots of the key written as
  underscores (https://cloud.google.com/kubernetes-engine/docs/concepts/about-logs; the query
  GoogleCloudPlatform/observability-analytics-samples samples/logging/kubernetes/
  k8s_tpu_jobset_stdout.sql selects a JobSet's pods by `k8s-pod/jobset_sigs_k8s_io/jobset-name`).
  JobSet labels every pod of a run with `jobset.sigs.k8s.io/jobset-name: <run>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

CONSOLE = "https://console.cloud.google.com"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# How far back the logs link looks: a run's first lines may be days old.
LOGS_DURATION = "P7D"


@dataclass(frozen=True)
class RunPlace:
    """Where a run lives. `location` and `cluster` are empty where the stack names its cluster only by a
    kubeconfig context (the console has no page for it then; the logs are found without them)."""

    project: str
    location: str
    cluster: str
    namespace: str
    run: str


def pod_label_field(key: str) -> str:
    """The Cloud Logging field of a pod label (`k8s-pod/<key>`, dots as underscores), quoted for a query."""
    return 'labels."k8s-pod/' + key.replace(".", "_") + '"'


def logs_query(place: RunPlace, container: str = "trainer", pod: str = "") -> str:
    """The Logging query of a run's trainer containers (one pod's when `pod` is given), one clause a line."""
    clauses = ['resource.type="k8s_container"', f'resource.labels.project_id="{place.project}"']
    if place.location and place.cluster:
        clauses += [f'resource.labels.location="{place.location}"',
                    f'resource.labels.cluster_name="{place.cluster}"']
    clauses += [f'resource.labels.namespace_name="{place.namespace}"',
                f'resource.labels.container_name="{container}"',
                f'{pod_label_field(JOBSET_NAME_LABEL)}="{place.run}"']
    if pod:
        clauses.append(f'resource.labels.pod_name="{pod}"')
    return "\n".join(clauses)


def logs_url(place: RunPlace, container: str = "trainer", pod: str = "") -> str:
    query = quote(logs_query(place, container, pod), safe="")
    return f"{CONSOLE}/logs/query;query={query};storageScope=project;duration={LOGS_DURATION}?project={place.project}"


def console_url(place: RunPlace) -> str:
    """The run's workload page; empty where the cluster's location and name are not known."""
    if not (place.location and place.cluster):
        return ""
    return (f"{CONSOLE}/kubernetes/service/{place.location}/{place.cluster}/{place.namespace}/{place.run}"
            f"/details?project={place.project}")


def run_links(place: RunPlace) -> dict[str, str]:
    """The run's `console` and `logs` links (the console's only where it has a page for the run)."""
    links = {"logs": logs_url(place)}
    console = console_url(place)
    if console:
        links = {"console": console, **links}
    return links
