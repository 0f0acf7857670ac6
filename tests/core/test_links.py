"""A run's console and Cloud Logging links: the query selects the run's trainer containers by the labels GKE
writes, and the stack outputs carry the same links the tools print."""

from __future__ import annotations

from urllib.parse import unquote

from core.links import RunPlace, console_url, logs_query, logs_url, run_links
from stack.places import run_place
from stack.reader import load_files
from tests.support.pulumi_harness import ROOT, run_stack

PLACE = RunPlace("my-project-id", "us-east5", "finetune-dev", "finetune", "gemma3-single-host")


def test_the_query_names_the_cluster_namespace_container_and_the_jobset_label():
    assert logs_query(PLACE).splitlines() == [
        'resource.type="k8s_container"',
        'resource.labels.project_id="my-project-id"',
        'resource.labels.location="us-east5"',
        'resource.labels.cluster_name="finetune-dev"',
        'resource.labels.namespace_name="finetune"',
        'resource.labels.container_name="trainer"',
        'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="gemma3-single-host"',
    ]


def test_the_logs_link_carries_the_query_and_the_project():
    url = logs_url(PLACE, pod="gemma3-single-host-trainer-0-0-abcde")
    head, _, project = url.partition("?project=")
    assert project == "my-project-id"
    assert head.startswith("https://console.cloud.google.com/logs/query;query=")
    query = unquote(head.split(";query=", 1)[1].split(";", 1)[0])
    assert query.endswith('resource.labels.pod_name="gemma3-single-host-trainer-0-0-abcde"')
    assert ";duration=P7D" in head


def test_a_cluster_known_only_by_context_has_logs_but_no_console_page():
    place = RunPlace("my-project-id", "", "", "ml-team", "r")
    assert console_url(place) == ""
    assert set(run_links(place)) == {"logs"}
    assert "cluster_name" not in logs_query(place)


def test_the_console_page_is_the_workload_page():
    assert console_url(PLACE) == ("https://console.cloud.google.com/kubernetes/service/us-east5/finetune-dev/"
                                  "finetune/gemma3-single-host/details?project=my-project-id")


def test_the_stack_outputs_carry_each_runs_links():
    outputs = run_stack("dev").outputs
    config = load_files("dev", ROOT)
    assert outputs["runLinks"] == {"gemma3-single-host": run_links(run_place(config, "gemma3-single-host"))}
    assert outputs["runLinks"]["gemma3-single-host"]["console"].split("/kubernetes/service/")[1].startswith(
        f"{config.region}/{config.gke_cluster_name}/{config.runs_namespace}/")


def test_an_existing_cluster_by_context_exports_logs_links_only():
    outputs = run_stack("existing-dev").outputs
    assert outputs["runLinks"] and all(set(links) == {"logs"} for links in outputs["runLinks"].values())
