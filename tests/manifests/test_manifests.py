"""Every rendered run: schema-valid (strictly), true to its pool's contract, and as reviewed."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from core.catalog import Family
from trainers.exit_codes import CONFIG_ERROR, TERMINATED
from manifests import jobset, storage
from manifests import pod as pod_parts
from tests.support import examples, goldens, schemas
from tools import render
from manifests.run import build_run
from stack.queueing import run_contract

STACKS = [goldens.EXAMPLES, *render.shipped_stacks()]


def stack_inputs(stack: str):
    """(runs, contracts) of a stack, to check manifests against what they were built from."""
    if stack == goldens.EXAMPLES:
        return examples.RUNS, examples.CONTRACTS
    runs, contracts, _facts = render.stack_inputs(stack)
    return runs, contracts


CASES = [
    # The contract the run's pods follow: its pool's, or its Autopilot ladder's ComputeClass's.
    pytest.param(stack, run, run_contract(run, contracts), goldens.manifests_for(stack)[run.name],
                 id=f"{stack}/{run.name}")
    for stack in STACKS
    for runs, contracts in [stack_inputs(stack)]
    for run in runs
]


def pod(manifest: dict) -> dict:
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def trainer(manifest: dict) -> dict:
    [container] = pod(manifest)["spec"]["containers"]
    return container


# --- schemas ---------------------------------------------------------------


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_manifest_is_schema_valid(stack, run, contract, manifest):
    assert schemas.manifest_errors(manifest) == []


def typo(manifest: dict, path: tuple, wrong: str) -> dict:
    """`manifest` with the field at `path` renamed to `wrong`."""
    broken = copy.deepcopy(manifest)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[wrong] = node.pop(path[-1])
    return broken


MULTISLICE = examples.RUNS[2]
JOB = ("spec", "replicatedJobs", 0, "template", "spec")


@pytest.fixture(scope="module")
def multislice_manifest():
    return build_run(MULTISLICE, examples.CONTRACTS[MULTISLICE.pool], examples.FACTS)


@pytest.mark.parametrize(
    "path,wrong",
    [
        (("spec", "failurePolicy"), "failurPolicy"),
        (("spec", "network", "enableDNSHostnames"), "enableDnsHostnames"),
        (("spec", "replicatedJobs", 0, "replicas"), "replica"),
        (("metadata", "annotations"), "anotations"),
    ],
)
def test_jsonschema_rejects_a_typo_in_the_jobset(multislice_manifest, path, wrong):
    errors = schemas.jobset_errors(typo(multislice_manifest, path, wrong))
    assert any(f"'{wrong}' was unexpected" in e for e in errors), errors


@pytest.mark.parametrize(
    "path,wrong",
    [
        ((*JOB, "backoffLimit"), "backofLimit"),
        ((*JOB, "template", "spec", "nodeSelector"), "nodeSelecter"),
        ((*JOB, "template", "spec", "containers", 0, "volumeMounts"), "volumeMount"),
    ],
)
def test_both_validators_reject_a_typo_in_the_job(multislice_manifest, path, wrong):
    broken = typo(multislice_manifest, path, wrong)
    assert any(f"'{wrong}' was unexpected" in e for e in schemas.jobset_errors(broken))
    assert any(f"'{wrong}' was unexpected" in e for e in schemas.job_errors(broken))


def test_jsonschema_rejects_an_action_outside_the_v0_12_enum(multislice_manifest):
    broken = copy.deepcopy(multislice_manifest)
    broken["spec"]["failurePolicy"]["rules"][1]["action"] = "RestartJobSetAndIgnoreMaxRestart"
    assert any("is not one of" in e for e in schemas.jobset_errors(broken))


def test_strict_keeps_fields_the_schema_preserves():
    schema = {"type": "object", "properties": {
        "open": {"type": "object", "properties": {"a": {}}, "x-kubernetes-preserve-unknown-fields": True},
        "closed": {"type": "object", "properties": {"a": {}}},
        "metadata": {"type": "object"},
    }}  # fmt: skip
    strict = schemas.strict(schema)
    assert "additionalProperties" not in strict["properties"]["open"]
    assert strict["properties"]["closed"]["additionalProperties"] is False


# --- invariants ------------------------------------------------------------


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_scheduling_equals_the_contract(stack, run, contract, manifest):
    rjob = manifest["spec"]["replicatedJobs"][0]
    spec = pod(manifest)["spec"]
    assert rjob["replicas"] == contract.slices
    assert rjob["template"]["spec"]["parallelism"] == contract.hosts_per_slice
    assert rjob["template"]["spec"]["completions"] == contract.hosts_per_slice
    if contract.queue is None:
        assert spec["nodeSelector"] == contract.node_selector
        assert spec["tolerations"] == list(contract.tolerations)
    else:  # Kueue adds the admitting flavor's labels and tolerations: the rest of the contract
        assert {**spec["nodeSelector"], **contract.flavor_node_labels} == contract.node_selector
        assert not set(spec["nodeSelector"]) & set(contract.flavor_node_labels)
        assert spec["tolerations"] + list(contract.flavor_tolerations) == list(contract.tolerations)
    chips = str(run.chips_per_host or contract.chips_per_host)
    resources = trainer(manifest)["resources"]
    assert resources["requests"] == {contract.resource_name: chips, **pod_parts.resource_requests(run.row_on(contract.family), contract)}
    assert resources["limits"] == resources["requests"]  # memory limit = request: what the node was sized for
    if contract.node_pool_names:  # Standard: the pool label pins the pool (and its reservation)
        assert not [k for k in spec["nodeSelector"] if k.startswith("cloud.google.com/reservation-")]


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_multislice_runs_are_one_job_per_node_pool_and_join_over_dcn(stack, run, contract, manifest):
    annotations = manifest["metadata"]["annotations"]
    env = {e["name"]: e for e in trainer(manifest)["env"]}
    if contract.family is Family.TPU and contract.slices > 1:
        assert annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
        assert env["MEGASCALE_COORDINATOR_ADDRESS"]["value"] == f"{run.name}-trainer-0-0.{run.name}"
        assert "job-index" in env["MEGASCALE_SLICE_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert "replicatedjob-replicas" in env["MEGASCALE_NUM_SLICES"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert manifest["spec"]["network"]["subdomain"] == run.name
    else:
        assert not any(name.startswith("MEGASCALE_") for name in env)


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_images_by_digest_only(stack, run, contract, manifest):
    image = trainer(manifest)["image"]
    assert re.search(r"@sha256:[0-9a-f]{64}$", image)
    assert ":latest" not in yaml.safe_dump(manifest)


SECRETISH = re.compile(r"(token|secret|password|key)", re.IGNORECASE)


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_no_secret_literal(stack, run, contract, manifest):
    for var in trainer(manifest)["env"]:
        if SECRETISH.search(var["name"]) and "value" in var:
            assert var["value"].startswith("/var/run/secrets/"), var  # a path to a mounted file, not the secret
    text = yaml.safe_dump(manifest)
    assert not re.search(r"hf_[A-Za-z0-9]{20,}", text)
    assert "secretKeyRef" not in text and "secretName" not in text  # no Kubernetes Secret: the token is mounted
    # from Secret Manager (manifests/token.py), in the pods that read the Hub only


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_read_write_mounts_only_where_the_trainer_writes(stack, run, contract, manifest):
    spec = pod(manifest)["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    writable = {m["mountPath"] for m in trainer(manifest)["volumeMounts"] if not m.get("readOnly")}
    row = run.row_on(contract.family)  # not the bucket: /dev/shm, the Hub cache, where the row has them
    local = {"/dev/shm"} if row.shm_size else set()
    local |= {pod_parts.HF_CACHE_DIR} if row.hf_cache_size else set()
    exports = {storage.EXPORT_DIR} if run.export is not None else set()
    assert writable == {storage.CHECKPOINT_DIR, storage.PROFILE_DIR} | exports | local
    written_prefixes = []
    layout = examples.FACTS.layout if stack == goldens.EXAMPLES else render.stack_inputs(stack)[2].layout
    assert layout.stack == ("example" if stack == goldens.EXAMPLES else stack)
    for volume in volumes.values():
        if (volume.get("csi") or {}).get("driver") != storage.CSI_DRIVER:  # the bucket's, not the token's
            continue
        options = volume["csi"]["volumeAttributes"]["mountOptions"]
        only_dir = re.search(r"only-dir=([^,]+)", options).group(1)
        if volume["csi"]["readOnly"]:
            assert only_dir == f"datasets/{layout.stack}"  # the stack's datasets only
        else:
            written_prefixes.append(only_dir)
            assert "file-cache:max-size-mb:0" in options and "metadata-cache:ttl-secs:0" in options
    # Each prefix carries the stack: another stack's run of the same name writes elsewhere.
    exported = [f"exports/{layout.stack}/{run.name}"] if run.export is not None else []
    assert sorted(written_prefixes) == [f"checkpoints/{layout.stack}/{run.name}", *exported,
                                        f"profiles/{layout.stack}/{run.name}"]


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_lifecycle_under_pulumi(stack, run, contract, manifest):
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == run.name
    assert manifest["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "ttlSecondsAfterFinished" not in spec
    # Kueue admits a queued run by unsuspending it; the others are suspended only when asked.
    assert spec["suspend"] is (run.suspend or contract.queue is not None)
    # What JobSet's defaulting webhook would otherwise add (v0.12.0 jobset_webhook.go Default).
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"]["enableDNSHostnames"] is True and spec["network"]["publishNotReadyAddresses"] is True
    assert spec["failurePolicy"]["restartStrategy"] == "Recreate"
    assert all(rule["name"] for rule in spec["failurePolicy"]["rules"])
    rjob = spec["replicatedJobs"][0]
    assert rjob["groupName"] == "default" and rjob["template"]["spec"]["completionMode"] == "Indexed"
    assert pod(manifest)["spec"]["restartPolicy"] == "Never"
    assert pod(manifest)["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"


# --- failure policy --------------------------------------------------------

# The messages the Job controller writes when a podFailurePolicy FailJob rule
# matches (k8s.io/kubernetes pkg/controller/job/pod_failure_policy.go).
def exit_message(code: int) -> str:
    return f"Container trainer for pod finetune/run-trainer-0-0-abcde failed with exit code {code} matching FailJob rule at index 0"


DISRUPTED = "Pod finetune/run-trainer-0-1-abcde has condition DisruptionTarget matching FailJob rule at index 1"


def first_rule(message: str, reason: str = "PodFailurePolicy") -> str:
    """The JobSet rule that handles a Job failure, as the JobSet controller picks it."""
    for rule in jobset.failure_policy(3)["rules"]:
        reasons = rule.get("onJobFailureReasons", [])
        patterns = rule.get("onJobFailureMessagePatterns", [])
        if (not reasons or reason in reasons) and (not patterns or any(re.search(p, message) for p in patterns)):
            return rule["action"]
    return "RestartJobSet"


def test_config_error_fails_the_run_at_once():
    assert first_rule(exit_message(CONFIG_ERROR)) == "FailJobSet"


def test_disruption_restarts_without_counting():
    assert first_rule(DISRUPTED) == "RestartJobSetAndIgnoreMaxRestarts"


@pytest.mark.parametrize("code", [1, 2, 137, TERMINATED, 178])
def test_other_failures_restart_and_count(code):
    assert first_rule(exit_message(code), reason="BackoffLimitExceeded") == "RestartJobSet"


def test_pod_failure_policy_routes_exit_78_and_disruptions_to_the_jobset():
    rules = jobset.pod_failure_policy("trainer")["rules"]
    assert rules[0]["onExitCodes"] == {"containerName": "trainer", "operator": "In", "values": [CONFIG_ERROR]}
    assert rules[1]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    assert all(rule["action"] == "FailJob" for rule in rules)


# --- goldens ---------------------------------------------------------------

REGENERATE = "regenerate with `make golden` and review the diff"


def golden_drift(stack: str, directory, manifests=None) -> list[str]:
    """How the goldens in `directory` differ from the stack's manifests (its runs'), one line per file."""
    manifests = goldens.manifests_for(stack) if manifests is None else manifests
    on_disk = {p.stem for p in directory.glob("*.yaml")}
    problems = [f"{stack}/{name}.yaml: no golden" for name in sorted(set(manifests) - on_disk)]
    problems += [f"{stack}/{name}.yaml: not a run of {stack}" for name in sorted(on_disk - set(manifests))]
    problems += [
        f"{stack}/{name}.yaml is stale"
        for name, manifest in sorted(manifests.items())
        if name in on_disk and render.to_yaml(manifest) != (directory / f"{name}.yaml").read_text()
    ]
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_goldens_match(stack):
    assert golden_drift(stack, goldens.GOLDEN_DIR / stack) == [], REGENERATE


@pytest.mark.parametrize("stack", STACKS)
def test_kueue_goldens_match(stack):
    """tests/golden/<stack>/kueue/: the stack's Kueue objects, and no directory for a stack without Kueue."""
    directory = goldens.GOLDEN_DIR / stack / goldens.KUEUE
    assert golden_drift(stack, directory, goldens.kueue_manifests_for(stack)) == [], REGENERATE
    assert directory.is_dir() == bool(goldens.kueue_manifests_for(stack))


@pytest.mark.parametrize("stack", STACKS)
def test_ladder_goldens_match(stack):
    """tests/golden/<stack>/ladder/: the stack's ladder controller, and no directory for a stack without one."""
    directory = goldens.GOLDEN_DIR / stack / goldens.LADDER
    assert golden_drift(stack, directory, goldens.ladder_manifests_for(stack)) == [], REGENERATE
    assert directory.is_dir() == bool(goldens.ladder_manifests_for(stack))


@pytest.mark.parametrize("stack", render.shipped_stacks())
def test_every_shipped_stack_has_goldens_for_its_runs(stack):
    runs, _contracts, _facts = render.stack_inputs(stack)
    assert runs, f"Pulumi.{stack}.yaml declares no run"
    assert {p.stem for p in (goldens.GOLDEN_DIR / stack).glob("*.yaml")} == {r.name for r in runs}


def test_a_drifted_golden_fails(tmp_path):
    stack = "tpu-multislice"
    for golden in (goldens.GOLDEN_DIR / stack).glob("*.yaml"):
        (tmp_path / golden.name).write_text(golden.read_text())
    assert golden_drift(stack, tmp_path) == []
    [path] = tmp_path.glob("*.yaml")
    path.write_text(path.read_text().replace("replicas: 2", "replicas: 1"))
    (tmp_path / "removed-run.yaml").write_text("{}")
    assert golden_drift(stack, tmp_path) == [f"{stack}/removed-run.yaml: not a run of {stack}",
                                             f"{stack}/{path.name} is stale"]  # fmt: skip
    path.unlink()
    assert f"{stack}/{path.name}: no golden" in golden_drift(stack, tmp_path)


def test_render_writes_one_file_per_run_and_drops_stale_ones(tmp_path):
    (tmp_path / "mine.yaml").write_text("not the render's: kept")
    assert render.main(["--stack", "tpu-queued", "--out", str(tmp_path)]) == 0  # its runs: stale below
    assert render.main(["--stack", "tpu-multislice", "--out", str(tmp_path)]) == 0
    runs, _contracts, _facts = render.stack_inputs("tpu-multislice")
    assert {p.stem for p in tmp_path.glob("*.yaml")} == {r.name for r in runs} | {"mine"}
    loaded = yaml.safe_load((tmp_path / "gemma3-multislice.yaml").read_text())
    assert loaded == render.stack_manifests("tpu-multislice")["gemma3-multislice"]
