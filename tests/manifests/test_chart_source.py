"""Where the controllers' Helm charts come from: upstream, a local directory or a mirror."""

import pytest
from pydantic import ValidationError

from core.names import JOBSET_CHART, JOBSET_CHART_VERSION, KUEUE_CHART, KUEUE_CHART_VERSION
from manifests.controllers import chart_source
from stack.existing import Charts


def test_upstream_by_default():
    assert chart_source(JOBSET_CHART, JOBSET_CHART_VERSION, Charts()) == {
        "chart": "oci://registry.k8s.io/jobset/charts/jobset", "version": "0.12.0", "repository_opts": None}


def test_a_local_directory_holds_each_chart_by_name_at_its_own_version():
    assert chart_source(KUEUE_CHART, KUEUE_CHART_VERSION, Charts(dir="/opt/charts/")) == {
        "chart": "/opt/charts/kueue", "version": None, "repository_opts": None}


def test_an_oci_mirror_serves_the_chart_under_its_path_at_the_pinned_version():
    assert chart_source(KUEUE_CHART, KUEUE_CHART_VERSION, Charts(repository="oci://m.example.com/c/")) == {
        "chart": "oci://m.example.com/c/kueue", "version": "0.19.2", "repository_opts": None}


def test_an_https_repository_serves_the_chart_by_name():
    assert chart_source(JOBSET_CHART, JOBSET_CHART_VERSION, Charts(repository="https://charts.example.com")) == {
        "chart": "jobset", "version": "0.12.0", "repository_opts": {"repo": "https://charts.example.com"}}


def test_a_repository_is_a_chart_repository_address():
    with pytest.raises(ValidationError) as err:
        Charts(repository="registry.example.com/charts")
    assert "repository: 'registry.example.com/charts' is not a chart repository address" in str(err.value)
