"""The offline plan (`make plan`, `make plan-diff`): resources, cost, masking, errors, diffs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core import catalog, prices
from tools.offline import ROOT, SHIPPED_STACKS
from tools.plan import collect as collecting
from tools.plan.collect import SECRET, PlanError, collect, mask
from tools.plan.cost import render_cost
from tools.plan.diff import diff, render_diff
from tools.plan.show import render, write_manifests
from tools.plan.tree import key_inputs

# What a planned tree needs: the program, its stack files, and the sources it reads.
TREE = ("Pulumi.yaml", "__main__.py", "core", "stack", "manifests", "admission", "components", "trainers", "controllers", "docker", "tools")


@pytest.fixture(scope="module")
def plans() -> dict[str, dict]:
    # As deployed: the stacks hold no secret (the Hugging Face token is in Secret Manager).
    return {stack: collect(stack) for stack in SHIPPED_STACKS}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_stack_plans_with_its_pools_and_costs(plans, stack):
    result = plans[stack]
    types = {r["type"] for r in result["resources"]}
    assert "gcp:container/cluster:Cluster" in types
    assert "kubernetes:helm.sh/v3:Release" in types
    stack_file = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    groups = stack_file.get("gke-finetune:pools") or stack_file.get("gke-finetune:shapes") or []
    assert [p["name"] for p in result["cost"]["pools"]] == [g["name"] for g in groups]
    total = 0.0
    for group, line in zip(groups, result["cost"]["pools"]):
        shape = catalog.lookup(group["accelerator"], group.get("topology"), group.get("machineType"))
        slices = group.get("slices", 1)
        assert line["chips"] == shape.chips_per_slice * slices
        assert line["vms"] == shape.vms_per_slice * slices
        assert line["slices"] == slices
        low, high = prices.usd_per_hour(shape, group.get("capacity", "on-demand"), slices)
        assert (line["usd_per_hour_low"], line["usd_per_hour"]) == (pytest.approx(low, abs=0.01), pytest.approx(high))
        assert line["list_usd_per_hour"] == pytest.approx(shape.usd_per_hour(slices))
        assert line["price_as_of"] == prices.price(shape, line["capacity"]).as_of
        total += high
    assert result["cost"]["total_usd_per_hour"] == pytest.approx(total)
    # Standard stacks declare one GKE node pool per slice of each accelerator pool.
    if stack_file.get("gke-finetune:mode", "standard") == "standard":
        node_pools = [r for r in result["resources"] if r["type"] == "gcp:container/nodePool:NodePool"]
        assert len(node_pools) == 1 + sum(g.get("slices", 1) for g in groups)  # + the system pool
    runs = stack_file.get("gke-finetune:runs") or []
    assert [r["name"] for r in result["cost"]["runs"]] == [r["name"] for r in runs]


def test_plan_text_shows_the_tree_the_prices_and_the_total(plans):
    text = render(plans["tpu-multislice"])
    assert "gke-finetune:platform:NodePools  accelerators" in text
    assert "├─ " in text and "└─ " in text
    assert "tpuTopology=2x4" in text
    price = catalog.TPU_V6E.price
    # A Spot pool: the range Spot's published discount allows, from the on-demand list price, both sourced.
    assert "tpu-v6e spot per chip, read 2026-12-02; at least 0.243, at most the on-demand 2.70" in text
    assert prices.SPOT_SOURCE in text and f"of the on-demand list price: {price.source}, read {price.as_of}" in text
    assert "total, every pool at full size" in text
    assert "3.89-43.20" in text  # 2 slices x 8 chips x 2.70, at most 91% off
    assert "[protect]" in text  # the data bucket survives destroy


def test_secrets_are_never_printed(plans):
    for result in plans.values():
        dumped = json.dumps(result) + render(result)
        assert collecting._SECRET_PLACEHOLDER not in dumped
        assert "kubernetes:core/v1:Secret" not in {r["type"] for r in result["resources"]}
    # a4's run reads the Hub: the token is mounted from Secret Manager, by name, never a value.
    (a4_token,) = [r for r in plans["a4"]["resources"] if r["type"].endswith(":SecretProviderClass")]
    assert "projects/my-project-id/secrets/hf-token/versions/latest" in a4_token["inputs"]["spec"]["parameters"]["secrets"]


@pytest.mark.parametrize("stack", [s for s in SHIPPED_STACKS if s != "a4"])
def test_tpu_stacks_plan_nothing_of_the_token(stack):
    result = collect(stack)
    assert not {r["type"] for r in result["resources"]} & {"kubernetes:core/v1:Secret",
                                                           "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"}


@pytest.mark.parametrize("stack", ["dev", "a4"])  # whether or not a run reads the Hub
@pytest.mark.parametrize("value, state", [("hf_plainvalue", "[plain text]"), ({"secure": "AAABAHJvbmcK"}, "[secret]")])
def test_the_plan_refuses_a_token_in_the_stack_file_in_any_form(tmp_path, stack, value, state):
    tree = _copy_tree(tmp_path / "tree")
    config = {"config": {"gke-finetune:hfToken": value}}
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text() + yaml.safe_dump(config).split("\n", 1)[1]
    (tree / f"Pulumi.{stack}.yaml").write_text(text)
    result = _plan_cli(tree, "show", "--stack", stack, "--out", str(tmp_path / "m"))
    assert result.returncode == 1
    assert f"hfToken: '{state}'" in result.stderr and "gcloud secrets create hf-token" in result.stderr
    assert "hf_plainvalue" not in result.stdout + result.stderr


def test_mask_handles_wire_secrets_embedded_values_and_numbers():
    wire = {collecting._SECRET_SIG_KEY: collecting._SECRET_SIG, "value": "hf_abc"}
    assert mask({"a": wire, "b": [f"token={collecting._SECRET_PLACEHOLDER}"], "n": 2.0, "x": 1.5}) == {
        "a": SECRET, "b": [SECRET], "n": 2, "x": 1.5,
    }


def test_key_inputs_pick_the_telling_fields():
    inputs = {"name": "v6e", "nodeConfig": {"machineType": "ct6e-standard-4t", "labels": {"a": "b"}},
              "placementPolicy": {"tpuTopology": "2x4", "type": "COMPACT"}}
    assert key_inputs(inputs) == (
        "name=v6e nodeConfig.machineType=ct6e-standard-4t placementPolicy.tpuTopology=2x4"
    )


def test_diff_reports_added_removed_and_modified_inputs():
    def res(name, **inputs):
        return {"type": "t", "name": name, "protect": False, "inputs": inputs}

    base = {"resources": [res("a", size=1), res("b", size=1)], "cost": {"total_usd_per_hour": 1.0}}
    head = {"resources": [res("a", size=2), res("c", size=1)], "cost": {"total_usd_per_hour": 3.0}}
    changes = diff(base, head)
    assert changes["added"] == ["t::c"]
    assert changes["removed"] == ["t::b"]
    assert changes["modified"] == {"t::a": {"inputs.size": (1, 2)}}
    assert changes["replaced"] == []
    text = render_diff(changes, "dev", "origin/main")
    assert "+ t::c" in text and "- t::b" in text and "~ t::a" in text
    assert "inputs.size: 1 → 2" in text
    assert "$1.00/hour → $3.00/hour" in text


def test_diff_marks_a_replacement_where_the_program_or_the_provider_replaces():
    def res(kind, name, replace=(), **inputs):
        return {"type": kind, "name": name, "protect": False, "replaceOnChanges": list(replace), "inputs": inputs}

    jobset = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    base = {"resources": [res(jobset, "r", ["spec.replicatedJobs"], spec={"replicatedJobs": [{"a": 1}], "suspend": 0}),
                          res("kubernetes:batch/v1:Job", "j", spec={"template": {"x": 1}}),
                          res("kubernetes:core/v1:Namespace", "n", metadata={"labels": {"a": "1"}})]}
    head = {"resources": [res(jobset, "r", ["spec.replicatedJobs"], spec={"replicatedJobs": [{"a": 2}], "suspend": 0}),
                          res("kubernetes:batch/v1:Job", "j", spec={"template": {"x": 2}}),
                          res("kubernetes:core/v1:Namespace", "n", metadata={"labels": {"a": "2"}})]}
    changes = diff(base, head)
    assert changes["replaced"] == ["kubernetes:batch/v1:Job::j", f"{jobset}::r"]
    only_suspend = diff(base, {"resources": [res(jobset, "r", ["spec.replicatedJobs"],
                                                      spec={"replicatedJobs": [{"a": 1}], "suspend": 1})]})
    assert only_suspend["replaced"] == [] and list(only_suspend["modified"]) == [f"{jobset}::r"]


# --- the command line, on copies of this tree ---------------------------------------------


def _copy_tree(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for rel in TREE:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest / rel)
    shutil.copy2(ROOT / "Pulumi.dev.yaml", dest / "Pulumi.dev.yaml")
    return dest


def _plan_cli(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tools.plan", *args],
        cwd=tree, capture_output=True, text=True, timeout=300,
    )


def _git(tree: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=tree, check=True, capture_output=True,
    )


def test_show_writes_the_run_manifests(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    out = tmp_path / "manifests"
    result = _plan_cli(tree, "show", "--stack", "dev", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Stack dev: ")
    runs = yaml.safe_load((tree / "Pulumi.dev.yaml").read_text())["config"].get("gke-finetune:runs") or []
    assert sorted(p.stem for p in out.glob("*.yaml")) == sorted(r["name"] for r in runs)
    for path in out.glob("*.yaml"):
        manifest = yaml.safe_load(path.read_text())
        assert manifest["kind"] in ("JobSet", "Job")
        assert ":latest" not in path.read_text()


def test_a_bad_stack_exits_non_zero_naming_the_field(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    stack = yaml.safe_load((tree / "Pulumi.dev.yaml").read_text())
    stack["config"]["gke-finetune:pools"][0]["topology"] = "3x3"
    (tree / "Pulumi.bad.yaml").write_text(yaml.safe_dump(stack))
    result = _plan_cli(tree, "show", "--stack", "bad")
    assert result.returncode == 1
    assert "topology" in result.stderr and "3x3" in result.stderr
    assert "nothing would be declared" in result.stderr
    assert result.stdout == ""


def test_plan_diff_shows_what_a_change_adds_and_modifies(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    stack = yaml.safe_load((tree / "Pulumi.dev.yaml").read_text())
    pools = stack["config"]["gke-finetune:pools"]
    pools[0]["autoscaling"] = {"minNodes": 0, "maxNodes": 2}
    pools.append({"name": "extra", "accelerator": "tpu-v6e", "topology": "2x2"})
    (tree / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))

    result = _plan_cli(tree, "diff", "--base", "main", "--stack", "dev")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "+ gcp:container/nodePool:NodePool::pool-extra" in out
    modified = f"~ gcp:container/nodePool:NodePool::pool-{pools[0]['name']}"
    assert modified in out
    assert "inputs.autoscaling.totalMaxNodeCount: 1 → 2" in out
    assert not [line for line in out.splitlines() if line.startswith("- ")]  # nothing removed
    extra = catalog.lookup("tpu-v6e", "2x2", None).usd_per_hour()
    assert f"$2.70/hour → ${2.70 + extra:.2f}/hour" in out
    # the base worktree is cleaned up
    listed = subprocess.run(["git", "worktree", "list"], cwd=tree, capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1


def test_plan_diff_of_an_unchanged_tree_is_empty(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    result = _plan_cli(tree, "diff", "--base", "main", "--stack", "dev")
    assert result.returncode == 0, result.stderr
    assert "No changes." in result.stdout


def test_plan_diff_of_a_trainer_change_shows_a_new_image_and_the_run_using_it(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    stack = yaml.safe_load((tree / "Pulumi.dev.yaml").read_text())
    pool = stack["config"]["gke-finetune:pools"][0]["name"]
    stack["config"]["gke-finetune:runs"] = [
        {"name": "gemma3", "trainer": "gemma-jax", "pool": pool, "data": "tinystories/train.txt",
         "args": ["--batch_size", "64"]}  # what one v6e chip holds (the default 128 does not)
    ]
    (tree / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    with (tree / "trainers/gemma_jax/__init__.py").open("a") as f:
        f.write("\n# a change to the trainer\n")

    result = _plan_cli(tree, "diff", "--base", "main", "--stack", "dev")
    assert result.returncode == 0, result.stderr
    changed = [line for line in result.stdout.splitlines() if line.startswith(("+ ", "- ", "~ ", "+- "))]
    # The image updated; the run using it and the staging Job that runs in it replaced, as the
    # engine does (the run's replaceOnChanges, the Kubernetes provider's own rule for a Job's template).
    replaced = " (replaced: a property it can't update in place changes)"
    assert changed == [
        "~ docker-build:index:Image::images-gemma-jax",
        "+- kubernetes:batch/v1:Job::datasets-tinystories" + replaced,
        "+- kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::runs-gemma3" + replaced,
    ]
    assert "inputs.tags: " in result.stdout
    image_lines = [line.strip() for line in result.stdout.splitlines() if ".image: " in line]
    assert image_lines and all(
        re.fullmatch(r"inputs\.spec\.\S+\.(containers|initContainers)\[0\]\.image: \S+ → \S+", line) for line in image_lines
    ), image_lines


def test_a4_is_priced_per_vm_and_flagged_when_on_demand(plans):
    """An A4 VM bills its GPUs, vCPUs, memory and local SSDs: the plan prices the VM, not 8 GPUs."""
    [pool] = plans["a4"]["cost"]["pools"]
    # The shipped A4 stack uses a reservation: its price is the reserved capacity's, paid whether used or not.
    assert pool["capacity"] == "reservation" and pool["usd_per_hour"] == pytest.approx(90.22) == pool["usd_per_hour_low"]
    assert pool["list_usd_per_hour"] == pytest.approx(catalog.A4_SHAPE.machine.price.usd_per_hour)
    assert pool["priced_per"] == "VM" and pool["price_source"] == prices.RESERVATION_SOURCE
    assert "the reserved capacity's price, 90.22 $/VM-hour" in render(plans["a4"])
    assert pool["note"] == ""
    on_demand = render_cost({"pools": [{**pool, "capacity": "on-demand",
                                             "note": catalog.NVIDIA_B200.on_demand_note}],
                                  "runs": [], "total_usd_per_hour": pool["usd_per_hour"]})
    assert any("rarely obtainable" in line for line in on_demand)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_plan_prints_each_run_s_requests_beside_the_node_s_allocatable(plans, stack):
    text = render(plans[stack])
    assert "Fit: each run's pod" in text
    for row in plans[stack]["fit"]:
        line = next(l for l in text.splitlines() if l.strip().startswith(row["run"]) and f" {row['resource']} " in l)
        assert row["requested"] in line and row["allocatable"] in line and row["headroom"] in line
    served = plans[stack]["cost"].get("serve")
    pods = {r["name"] for r in plans[stack]["cost"]["runs"]} | ({f"serve {served['run']}"} if served else set())
    assert {r["run"] for r in plans[stack]["fit"]} == pods


def test_plan_diff_of_one_trainers_change_leaves_the_other_trainers_runs_alone(tmp_path):
    tree = _copy_tree(tmp_path / "tree")
    stack = yaml.safe_load((tree / "Pulumi.dev.yaml").read_text())
    config = stack["config"]
    tpu = config["gke-finetune:pools"][0]["name"]
    config["gke-finetune:pools"].append({"name": "a4", "accelerator": "nvidia-b200", "capacity": "on-demand"})
    config.update({"gcp:region": "us-central1", "gke-finetune:zones": ["us-central1-b"]})  # v6e and B200 both there
    config["gke-finetune:runs"] = [
        {"name": "gemma3", "trainer": "gemma-jax", "pool": tpu, "data": "tinystories/train.txt", "args": ["--batch_size", "64"]},
        {"name": "sql", "trainer": "trl-gpu", "pool": "a4"},
    ]
    (tree / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "base")
    with (tree / "trainers/trl_gpu/__init__.py").open("a") as f:
        f.write("\n# a change to the GPU trainer\n")

    result = _plan_cli(tree, "diff", "--base", "main", "--stack", "dev")
    assert result.returncode == 0, result.stderr
    changed = [line for line in result.stdout.splitlines() if line.startswith(("+ ", "- ", "~ ", "+- "))]
    assert changed == [
        "~ docker-build:index:Image::images-trl-gpu",
        "+- kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::runs-sql (replaced: a property it can't update in place changes)",
    ]


def test_the_plan_shows_each_ladder_rung_and_the_worst_case(plans):
    [ladder, own] = plans["tpu-queued"]["cost"]["ladders"]
    assert [r["pool"] for r in ladder["rungs"]] == ["spot-v6e-2x4", "v6e-2x4", "queued-v6e-2x4"]
    assert [r["pool"] for r in own["rungs"]] == ["v6e-2x4", "queued-v6e-2x4"]  # one's own container's
    # 8 chips at 2.70 $/chip-hour on demand; Spot at most 91% off, queued (DWS) at most 53% off.
    assert [(r["usd_per_hour_low"], r["usd_per_hour"]) for r in ladder["rungs"]] == [
        (1.94, 21.60), (21.60, 21.60), (10.15, 21.60)]
    assert len({(r["usd_per_hour_low"], r["usd_per_hour"]) for r in ladder["rungs"]}) == 3  # a price per rung
    assert ladder["worst"] == "queued-v6e-2x4"  # every rung tops out at list price: the last rung
    text = render(plans["tpu-queued"])
    assert "run gemma3-ladder: Kueue tries, in order" in text
    assert re.search(r"1\. spot-v6e-2x4 +spot +1\.94-21\.60\n", text)
    assert re.search(r"2\. v6e-2x4 +on-demand +21\.60\n", text)
    assert re.search(r"3\. queued-v6e-2x4 +queued +10\.15-21\.60  <- worst case", text)
    for source in (prices.SPOT_SOURCE, prices.DWS_SOURCE, catalog.TPU_V6E.price.source):
        assert source in text
    for stack in ("dev", "tpu-multihost", "tpu-multislice", "a4"):
        assert plans[stack]["cost"]["ladders"] == [] and "Capacity ladders" not in render(plans[stack])
    # Autopilot: GKE tries the rungs, as the run's ComputeClass lists them.
    [autopilot] = plans["autopilot"]["cost"]["ladders"]
    assert [(r["pool"], r["capacity"]) for r in autopilot["rungs"]] == [("v6e-1x1", "spot"),
                                                                          ("v6e-1x1-on-demand", "on-demand")]
    text = render(plans["autopilot"])
    assert "run gemma3-single-host: GKE (ComputeClass finetune-ladder-gemma3-single-host-8edc53) tries, in order" in text


def test_the_plan_writes_the_kueue_objects_beside_the_runs(plans, tmp_path):
    written = write_manifests(plans["tpu-queued"], tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in written} >= {
        "gemma3-ladder.yaml", "kueue/clusterqueue-finetune.yaml", "kueue/resourceflavor-finetune-queued-v6e-2x4-1e7dde.yaml",
        "kueue/provisioningrequestconfig-finetune-queued-v6e-2x4-provisioning-3c2d5e.yaml",
    }
    write_manifests(plans["dev"], tmp_path)  # a stack without Kueue leaves no kueue/ behind
    assert not (tmp_path / "kueue").exists()


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_plan_says_what_can_reach_the_control_plane_and_what_it_reaches(plans, stack):
    text = render(plans[stack])
    access = text.split("\nAccess\n", 1)[1].split("\n\n", 1)[0]
    assert "control plane: DNS-based endpoint only" in access and "IP endpoint closed" in access
    kueue = bool(plans[stack]["kueue"])
    ports = "tcp:8082, tcp:9443" if kueue else "tcp:9443"
    assert f"firewall finetune-{stack}-webhooks: the control plane to nodes tagged finetune-{stack}-nodes on {ports}" in access


def test_the_plan_states_the_pod_security_level_each_stack_s_namespace_needs(plans):
    """Each pod's least strict level and the namespace's (admission/namespace_needs.py), as `make plan` prints it."""
    multislice = render(plans["tpu-multislice"])
    assert "Pod Security: namespace finetune must allow level privileged (the stack declares it with that label)" \
        in multislice
    assert "  privileged  run 'gemma3-multislice': not stricter, for host namespaces (hostNetwork=true)" in multislice
    assert "  restricted  dataset 'tinystories' (its staging Job)" in multislice
    assert plans["a4"]["pod_security"]["level"] == "restricted"
    namespace = next(r for r in plans["dev"]["resources"] if r["type"] == "kubernetes:core/v1:Namespace")
    assert namespace["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_the_plan_says_which_cluster_scoped_objects_a_deployed_stack_sees_renamed(plans):
    from core.names import cluster_scoped
    text = render(plans["tpu-queued"])
    assert "A stack deployed with the earlier names sees `pulumi preview` replace each of these" in text
    assert f"  resourceflavor finetune-v6e-2x4 -> {cluster_scoped('finetune', 'v6e-2x4')}" in text
    assert "  workloadpriorityclass" not in text  # a run's label names it: its name stays
    assert "ladder-gemma3-single-host -> finetune-ladder-gemma3-single-host-" in render(plans["autopilot"])
    assert "Cluster-scoped names" not in render(plans["dev"])  # no Kueue, nothing renamed


def test_the_plan_shows_the_model_server_s_objects_and_cost(plans):
    served = plans["a4"]
    assert served["cost"]["serve"] == {"run": "gemma4-sql", "pool": "a4", "replicas": 1, "capacity": "reservation",
                                       "chips": 8, "usd_per_hour": 90.22, "usd_per_hour_low": 90.22}
    text = render(served)
    assert "serving run gemma4-sql's export, 1 server(s) of a VM each, while it runs (on the reservation" in text
    from core.names import cluster_scoped
    assert sorted(served["serve"]) == ["deployment-serve-gemma4-sql", f"priorityclass-{cluster_scoped('finetune', 'serving')}",
                                       "service-serve-gemma4-sql"]
    assert plans["dev"]["cost"]["serve"] is None and plans["dev"]["serve"] == {}
