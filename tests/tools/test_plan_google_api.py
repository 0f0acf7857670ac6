"""`make plan` refuses a program whose Google Cloud requests Google's definitions refuse, naming what Google allows.

Each case is the program with one component's source changed the way a
developer would get it wrong (the module re-executed from its changed
text in place of the real one), planned by `tools.plan.collect.collect` as `make
plan` does; one case goes through the command line on a copy of the tree.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tools.plan.collect import PlanError, collect
from tools.plan.show import render
from tools.offline import ROOT

PLAN_TREE = ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "core", "stack", "manifests", "admission", "components",
             "trainers", "controllers", "docker", "tools")
NODE_POOL_CREATE = "container v1beta1 rev 20261027 container.projects.locations.clusters.nodePools.create"
CLUSTER_CREATE = "container v1beta1 rev 20261027 container.projects.locations.clusters.create"
FIREWALL_INSERT = "compute beta rev 20261106 compute.firewalls.insert"


def mutated_plan_problems(stack: str, module: str, old: str, new: str) -> list[str]:
    """The problems `make plan` prints for `stack` with `old` replaced by `new` in `module`'s source."""
    path = ROOT / (module.replace(".", "/") + ".py")
    source = path.read_text()
    assert source.count(old) == 1, f"{old!r} is not once in {path}: the mutation no longer applies"
    # Every component imported first: none is first imported from (and bound to) the changed module.
    for component in sorted((ROOT / "components").glob("*.py")):
        importlib.import_module(f"components.{component.stem}")
    changed = types.ModuleType(module)
    changed.__file__ = str(path)
    # Only the changed module is swapped back afterwards: restoring the whole of sys.modules would drop the
    # modules first imported meanwhile (pulumi-gcp loads its types lazily), whose classes later objects keep.
    original = sys.modules[module]
    sys.modules[module] = changed
    try:
        exec(compile(source.replace(old, new), str(path), "exec"), changed.__dict__)  # noqa: S102 (the program, mutated)
        with pytest.raises(PlanError) as refused:
            collect(stack)
    finally:
        sys.modules[module] = original
    return refused.value.problems


MISTAKES = {
    "placement policy type": (
        "tpu-multihost", "components.node_pools", 'type="COMPACT"', 'type="COMPACTED"',
        ["pool-v6e-2x4 (gcp:container/nodePool:NodePool) placementPolicy.type: 'COMPACTED' is not a value Google lists "
         f"for PlacementPolicy.type [API field nodePool.placementPolicy.type, {NODE_POOL_CREATE}]; "
         "allowed: TYPE_UNSPECIFIED, COMPACT"]),
    "public access prevention": (
        "dev", "components.storage", 'public_access_prevention="enforced"', 'public_access_prevention="enabled"',
        ["data (gcp:storage/bucket:Bucket) publicAccessPrevention: 'enabled' is not a value Google lists for "
         "Bucket.iamConfiguration.publicAccessPrevention [API field iamConfiguration.publicAccessPrevention, "
         "storage v1 rev 20261009 storage.buckets.insert]; allowed: inherited, enforced"]),
    "release channel": (
        "dev", "components.cluster", "channel=cfg.release_channel)", "channel=cfg.release_channel.lower())",
        ["cluster (gcp:container/cluster:Cluster) releaseChannel.channel: 'regular' is not a value Google lists for "
         f"ReleaseChannel.channel [API field cluster.releaseChannel.channel, {CLUSTER_CREATE}]; "
         "allowed: UNSPECIFIED, RAPID, REGULAR, STABLE, EXTENDED"]),
    "workload metadata mode": (
        # GKE_METADATA_SERVER: the mode's name before GKE renamed it.
        "dev", "components.node_pools", '(mode="GKE_METADATA")', '(mode="GKE_METADATA_SERVER")',
        ["pool-v6e-1x1 (gcp:container/nodePool:NodePool) nodeConfig.workloadMetadataConfig.mode: "
         "'GKE_METADATA_SERVER' is not a value Google lists for WorkloadMetadataConfig.mode [API field "
         f"nodePool.config.workloadMetadataConfig.mode, {NODE_POOL_CREATE}]; "
         "allowed: MODE_UNSPECIFIED, GCE_METADATA, GKE_METADATA"]),
    "autoscaling location policy": (
        "dev", "components.node_pools", 'else "BALANCED"', 'else "BALANCE"',
        ["pool-v6e-1x1 (gcp:container/nodePool:NodePool) autoscaling.locationPolicy: 'BALANCE' is not a value Google "
         "lists for NodePoolAutoscaling.locationPolicy [API field nodePool.autoscaling.locationPolicy, "
         f"{NODE_POOL_CREATE}]; allowed: LOCATION_POLICY_UNSPECIFIED, BALANCED, ANY"]),
    "firewall direction": (
        "dev", "components.firewall", 'direction="INGRESS"', 'direction="INBOUND"',
        ["webhooks (gcp:compute/firewall:Firewall) direction: 'INBOUND' is not a value Google lists for "
         f"Firewall.direction [API field direction, {FIREWALL_INSERT}]; allowed: EGRESS, INGRESS"]),
    "NAT subnetwork option": (
        "dev", "components.network", '"ALL_SUBNETWORKS_ALL_IP_RANGES"', '"ALL_SUBNETWORKS"',
        ["network-nat (gcp:compute/routerNat:RouterNat) sourceSubnetworkIpRangesToNat: 'ALL_SUBNETWORKS' is not a "
         "value Google lists for RouterNat.sourceSubnetworkIpRangesToNat [API field "
         "nats[0].sourceSubnetworkIpRangesToNat, compute beta rev 20261106 compute.routers.patch]; "
         "allowed: ALL_SUBNETWORKS_ALL_IP_RANGES, ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES, LIST_OF_SUBNETWORKS"]),
    "unknown field": (
        # A plain dict with `port` for `ports`: Pulumi passes an unknown key through as it is.
        "dev", "components.firewall", "allows=[gcp.compute.FirewallAllowArgs(protocol=\"tcp\", ports=[str(p) for p in ports])]",
        "allows=[{\"protocol\": \"tcp\", \"port\": [str(p) for p in ports]}]",
        ["webhooks (gcp:compute/firewall:Firewall) allows[0].port: ['9443'] is not a field of Google's "
         f"Firewall.allowed [API field allowed[0].port, {FIREWALL_INSERT}]; allowed: IPProtocol, ports"]),
    "malformed int64": (
        # Soft delete in days, as `gcloud storage buckets create --soft-delete-duration=7d` spells it.
        "dev", "components.storage", "retention_duration_seconds=SOFT_DELETE_SECONDS",
        'retention_duration_seconds=f"{SOFT_DELETE_SECONDS // 86400}d"',
        ["data (gcp:storage/bucket:Bucket) softDeletePolicy.retentionDurationSeconds: '7d' is not a 64-bit integer "
         "(a decimal string in JSON) [API field softDeletePolicy.retentionDurationSeconds, storage v1 rev 20261009 "
         "storage.buckets.insert]; allowed: int64"]),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_make_plan_refuses_the_mistake_with_googles_allowed_values(mistake):
    stack, module, old, new, expected = MISTAKES[mistake]
    assert mutated_plan_problems(stack, module, old, new) == expected


def test_the_unchanged_program_plans_with_every_request_listed():
    result = collect("dev")
    rows = {(r["resource"], r["method"]) for r in result["google"]}
    assert ("cluster", "container.projects.locations.clusters.create") in rows
    assert ("webhooks", "compute.firewalls.insert") in rows
    assert all(r["fields"] > 0 for r in result["google"])
    text = render(result)
    assert "compute.firewalls.insert [compute beta rev 20261106]: webhooks (" in text
    # A Standard cluster without a node_pool block: the provider sends the cluster's own node
    # count and configuration (resourceContainerClusterCreate), which Google deprecates.
    [cluster] = [r for r in result["google"] if r["resource"] == "cluster"]
    assert [note.split(": ")[0] for note in cluster["deprecated"]] == [
        "cluster (gcp:container/cluster:Cluster) initialNodeCount", "cluster (gcp:container/cluster:Cluster) nodeConfig"]
    assert all("is deprecated in Google's Cluster [API field cluster." in note for note in cluster["deprecated"])
    assert "deprecated in Google's definition (accepted; the provider sends them):" in text


def test_make_plan_exits_non_zero_and_declares_nothing(tmp_path):
    """The command line `make plan` runs, on a copy of the tree with the firewall's direction misspelt."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for rel in PLAN_TREE:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, tree / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, tree / rel)
    firewall = tree / "components" / "firewall.py"
    firewall.write_text(firewall.read_text().replace('direction="INGRESS"', 'direction="INBOUND"'))
    result = subprocess.run([sys.executable, "-m", "tools.plan", "show", "--stack", "dev"],
                            cwd=tree, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "Stack dev is invalid; nothing would be declared:",
        f"  - {MISTAKES['firewall direction'][4][0]}",
    ]
