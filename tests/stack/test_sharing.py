"""A pool other stacks share: this stack's quota of it, and the Kueue the stack installs."""

from __future__ import annotations

import pytest
import yaml

from core import quantity
from manifests.controllers import kueue_chart_values
from manifests.kueue import kueue_manifests
from stack import reader
from tests.stack.test_queueing_rules import ONE_VM_2X4, pools, problems, values


def _with_quota(name: str, quota: dict) -> list[dict]:
    return [{**p, "quota": quota} if p["name"] == name else p for p in pools()]


def _flavor_quota(config, pool: str) -> dict[str, str]:
    manifests = kueue_manifests(config.kueue_flavors())
    [queue] = [m for m in manifests.values() if m["kind"] == "ClusterQueue"]
    flavor = config.contracts()[pool].flavor
    [entry] = [f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == flavor]
    return {r["name"]: r["nominalQuota"] for r in entry["resources"]}


def _big_pool(**quota) -> dict:
    """A pool of two 8-chip VMs, on which a run with a priority (so queued through Kueue) takes one."""
    config = values()
    pool = {**ONE_VM_2X4, "autoscaling": {"minNodes": 0, "maxNodes": 2}, **({"quota": quota} if quota else {})}
    run = {**config["runs"][1], "pool": pool["name"], "priority": "normal"}
    return values(pools=pools(pool), runs=[config["runs"][0], run])


def test_a_shared_pools_flavor_holds_only_the_stacks_part():
    """Two stacks whose runs use one pool of two VMs each declare one VM's chips, so that together they fit
    it: Kueue admits one run of each, not two of each while the second pair's pods wait for nodes."""
    whole, half = reader.validate(_big_pool()), reader.validate(_big_pool(chips=8))
    full, part = _flavor_quota(whole, "v6e-2x4-1vm"), _flavor_quota(half, "v6e-2x4-1vm")
    assert whole.contracts()["v6e-2x4-1vm"].quota_chips == 16
    assert full["google.com/tpu"] == "16" and part["google.com/tpu"] == "8"
    assert quantity.parse(full["cpu"]) == 2 * quantity.parse(part["cpu"])  # the node resources in proportion
    assert _flavor_quota(half, "v6e-2x4") == _flavor_quota(whole, "v6e-2x4")  # an unshared pool: whole


@pytest.mark.parametrize("chips,why", [
    (16, "of pool 'v6e-2x4', which holds 8 chips at most; allowed: 8..8"),
    (4, "of pool 'v6e-2x4': a run on it takes 8 chips (its whole slices)"),
    (0, "of pool 'v6e-2x4': a run on it takes 8 chips"),
])  # fmt: skip
def test_a_quota_that_cant_hold_a_run_or_exceeds_the_pool_is_refused_naming_the_key(chips, why):
    [message] = problems(pools=_with_quota("v6e-2x4", {"chips": chips}))
    assert message.startswith(f"pools[2].quota.chips: {chips} {why}"), message


def test_a_quota_on_a_pool_no_run_queues_on_is_refused():
    [message] = problems(pools=_with_quota("v6e-1x1", {"chips": 1}))
    assert message.startswith("pools[3].quota.chips: 1 of pool 'v6e-1x1', on which no run goes through Kueue")


def test_the_installed_kueue_takes_the_stacks_settings():
    config = reader.validate(values(kueue={"podsReadyTimeoutSeconds": 900, "requeueLimit": 2}))
    loaded = yaml.safe_load(kueue_chart_values(config.runs_namespace, config.kueue)["managerConfig"][
        "controllerManagerConfigYaml"])
    assert loaded["waitForPodsReady"]["timeout"] == "900s"
    assert loaded["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] == 2


def test_kueue_settings_are_refused_where_the_platform_teams_kueue_is_used():
    from stack.sharing import sharing_problems
    config = reader.validate(values(kueue={"requeueLimit": 2}))
    existing = type("Existing", (), {"controllers": "existing"})()
    shared = type("Config", (), {"kueue": config.kueue, "existing": existing, "pools": (),
                                 "kueue_flavors": config.kueue_flavors, "contracts": config.contracts})()
    [problem] = sharing_problems(shared)
    assert str(problem).startswith("kueue.requeueLimit: 2 but existingCluster.controllers is existing")
    assert sharing_problems(config) == []  # installed by the stack: its own settings


def test_the_installed_kueue_manages_the_other_teams_namespaces_the_stack_names():
    """Team A's stack installs Kueue for team B's too (`managedNamespaces`); the configuration team B's preview
    reads then selects team B's namespace (admission/installed_controllers.py)."""
    from admission.installed_controllers import kueue_config_problems

    config = reader.validate(values(kueue={"managedNamespaces": ["team-b"]}))
    loaded = yaml.safe_load(kueue_chart_values(config.runs_namespace, config.kueue)["managerConfig"][
        "controllerManagerConfigYaml"])
    assert loaded["managedJobsNamespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [config.runs_namespace, "team-b"]}]}
    assert kueue_config_problems(loaded, "team-b", {}, [], "ConfigMap k/c") == []
    [other] = kueue_config_problems(loaded, "team-c", {}, [], "ConfigMap k/c")
    assert "does not manage namespace 'team-c'" in str(other)
    alone = yaml.safe_load(kueue_chart_values(config.runs_namespace)["managerConfig"]["controllerManagerConfigYaml"])
    assert alone["managedJobsNamespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": config.runs_namespace}}


def test_a_managed_namespace_that_is_no_namespace_name_is_refused_naming_it():
    [message] = problems(kueue={"managedNamespaces": ["team-b", "Team_C"]})
    assert message.startswith("kueue.managedNamespaces[1]: 'Team_C' is not a namespace name"), message
