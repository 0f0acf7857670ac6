"""A pool other stacks share: this stack's quota of it, and the Kueue the stack installs."""

from __future__ import annotations

import pytest
import yaml

from core import quantity
from manifests.controllers import kueue_chart_values
from manifests.kueue import kueue_manifests
from stack import reader
from tests.support import schemas
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


@pytest.mark.parametrize("quota,why", [
    ({"chips": 16}, "chips: 16 of pool 'v6e-2x4', which holds 8 chips at most; allowed: 0..8 in steps of 8"),
    ({"chips": 4}, "chips: 4 of pool 'v6e-2x4': a run on it takes 8 chips (its whole slices)"),
    ({"chips": 0, "borrowingLimitChips": 0}, "chips: 0 of pool 'v6e-2x4' with borrowingLimitChips 0: the stack's "
     "queue could admit no run on it"),
    ({"chips": 8, "borrowingLimitChips": 8}, "borrowingLimitChips: 8 of pool 'v6e-2x4': a run takes 8 chips, and "
     "the limit is at most 0 chips (the rest of the pool)"),
    ({"chips": 8, "lendingLimitChips": 4}, "lendingLimitChips: 4 of pool 'v6e-2x4': a run takes 8 chips, and the "
     "limit is at most 8 chips (the share)"),
])  # fmt: skip
def test_a_quota_that_cant_hold_a_run_or_exceeds_the_pool_is_refused_naming_the_key(quota, why):
    [message] = problems(pools=_with_quota("v6e-2x4", quota))
    assert message.startswith(f"pools[2].quota.{why}"), message


def _queue_and_flavor(config, pool: str) -> tuple[dict, dict]:
    manifests = kueue_manifests(config.kueue_flavors())
    [queue] = [m for m in manifests.values() if m["kind"] == "ClusterQueue"]
    return queue, manifests[f"resourceflavor-{config.contracts()[pool].flavor}"]


def _team(namespace: str, **quota):
    config = _big_pool(**quota)
    return reader.validate({**config, "namespace": namespace, "createNamespace": True})


def test_stacks_sharing_a_pool_name_one_flavor_and_one_cohort_with_their_own_quota_and_limits():
    """Kueue lends and borrows only between queues of one cohort, of a flavor both name: two teams' stacks on one
    pool declare the same flavor (named from the nodes it selects) and cohort, each with its own share."""
    a = _team("team-a", chips=8)
    b = _team("team-b", chips=0, borrowingLimitChips=16, lendingLimitChips=0)
    (queue_a, flavor_a), (queue_b, flavor_b) = _queue_and_flavor(a, "v6e-2x4-1vm"), _queue_and_flavor(b, "v6e-2x4-1vm")
    assert flavor_a == flavor_b and flavor_a["metadata"]["name"].startswith("gke-finetune-shared-")
    assert queue_a["spec"]["cohortName"] == queue_b["spec"]["cohortName"]
    assert queue_a["metadata"]["name"] != queue_b["metadata"]["name"]
    assert schemas.kueue_errors(queue_b) == [] and schemas.kueue_errors(flavor_b) == []  # the CRDs' schemas, CEL aside
    shared = flavor_a["metadata"]["name"]
    [entry_b] = [f for f in queue_b["spec"]["resourceGroups"][0]["flavors"] if f["name"] == shared]
    tpu = {r["name"]: r for r in entry_b["resources"]}["google.com/tpu"]
    assert tpu == {"name": "google.com/tpu", "nominalQuota": "0", "borrowingLimit": "16", "lendingLimit": "0"}
    assert queue_b["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert queue_b["spec"]["flavorFungibility"]["whenCanBorrow"] == "TryNextFlavor"
    # The stack's pools nobody shares keep flavors of their own, and a stack without a shared pool no cohort.
    assert a.contracts()["v6e-2x4"].flavor != b.contracts()["v6e-2x4"].flavor
    alone, _ = _queue_and_flavor(reader.validate(_big_pool()), "v6e-2x4-1vm")
    assert "cohortName" not in alone["spec"] and alone["spec"]["preemption"]["reclaimWithinCohort"] == "Never"


def test_a_shared_flavor_is_named_from_the_nodes_it_selects():
    """Two flavors of one name always have one spec: the name changes with the nodes they select."""
    from core.names import shared_flavor_name

    one = shared_flavor_name({"cloud.google.com/gke-nodepool": "tpu-a"}, ())
    assert one == shared_flavor_name({"cloud.google.com/gke-nodepool": "tpu-a"}, [])
    assert one != shared_flavor_name({"cloud.google.com/gke-nodepool": "tpu-b"}, ())
    assert one != shared_flavor_name({"cloud.google.com/gke-nodepool": "tpu-a"},
                                     ({"key": "x", "operator": "Exists", "effect": "NoSchedule"},))
    assert len(shared_flavor_name({"k": "v" * 63}, ())) <= 63


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
