"""Each shipped stack as a stack for an existing cluster, through the real Pulumi CLI against the control plane.

The platform team's part is the harness's: the stack's GKE-shaped nodes and
the JobSet and Kueue controllers (install_stack, platform_only). The stack
declares the rest through `pulumi`, its Python language host and the
Kubernetes provider (e2e/harness/engine.py): preview lists what up creates;
up creates it and the runs start; a second preview changes nothing; one
run's changed arguments replace that run's JobSet and nothing else; an added
run adds only it; destroy leaves nothing of the stack in the cluster. Each
step's wall time is reported.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess

import pytest

from e2e.harness import faults
from e2e.harness.engine import Engine, copy_program, engine, engine_env, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.kube import ApiError, wait_for
from e2e.harness.observe import KUEUE, wait_bound
from e2e.harness.session import control_plane
from e2e.harness.tools import tools
from e2e.tests.run_commands import run_tool
from e2e.tests.scenario import JOBSET_API
from e2e.harness.stack_objects import stack_objects
from e2e.tests.settings import ENGINE_STACKS, LIFETIME
from e2e.tests.reports import Report
from tools.plan.collect import collect
from tools.plan.diff import diff

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
TIMEOUT = 180.0
ENGINE_REPORT = Report("engine")
DIFF_REPORT = Report("engine")
WRONG_REPORT = Report("engine")
WEBHOOK_REPORT = Report("engine")


def _changes(steps: list[dict]) -> list[tuple[str, str, str]]:
    return sorted((s["op"], s["type"], s["name"]) for s in steps if s["op"] != "same")


def _offline_plan(made: Engine) -> dict:
    """`make plan` of the engine's stack file, as a reviewer runs it offline."""
    return collect(made.stack, root=made.workdir)


def _engine_as_offline(steps: list[dict]) -> dict[str, list[str]]:
    """The engine's planned steps in the offline diff's terms: added, removed, replaced, modified."""
    by_op: dict[str, set[str]] = {"added": set(), "removed": set(), "replaced": set(), "modified": set()}
    for s in steps:
        key, op = f"{s['type']}::{s['name']}", s["op"]
        if op == "create":
            by_op["added"].add(key)
        elif op == "delete":
            by_op["removed"].add(key)
        elif op in ("replace", "create-replacement", "delete-replaced"):
            by_op["replaced"].add(key)
        elif op == "update":
            by_op["modified"].add(key)
    return {k: sorted(v) for k, v in by_op.items()}


def _offline_as_engine(before: dict, after: dict) -> dict[str, list[str]]:
    changes = diff(before, after)
    replaced = set(changes["replaced"])
    return {"added": changes["added"], "removed": changes["removed"], "replaced": sorted(replaced),
            "modified": sorted(set(changes["modified"]) - replaced)}


# Every kind an existing-cluster stack declares.
DECLARED_KINDS = (("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "Secret"),
                  ("secrets-store.csi.x-k8s.io/v1", "SecretProviderClass"), ("batch/v1", "Job"),
                  ("jobset.x-k8s.io/v1alpha2", "JobSet"), (KUEUE, "ResourceFlavor"), (KUEUE, "ClusterQueue"),
                  (KUEUE, "LocalQueue"), (KUEUE, "WorkloadPriorityClass"), (KUEUE, "AdmissionCheck"),
                  (KUEUE, "ProvisioningRequestConfig"))
# The provider applies server-side as field manager `pulumi-kubernetes-<random>` (its label
# `app.kubernetes.io/managed-by` is for client-side apply only): pulumi-kubernetes
# provider/pkg/provider/provider.go, fieldManagerName and Check (v4.25.0).
FIELD_MANAGER_PREFIX = "pulumi-kubernetes"


def _applied_by_pulumi(obj: dict) -> bool:
    return any(m.get("manager", "").startswith(FIELD_MANAGER_PREFIX) for m in obj["metadata"].get("managedFields") or [])


def _left_by_pulumi(kube) -> list[str]:
    found = []
    for api, kind in DECLARED_KINDS:
        try:
            objects = [o for o in kube.list(api, kind) if _applied_by_pulumi(o)]
        except ApiError as err:
            if err.status != 404:  # a stack without Kueue: no such API
                raise
            continue
        found += [f"{kind} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects
                  if not o["metadata"].get("deletionTimestamp")]
    return found


@pytest.fixture(scope="module", params=ENGINE_STACKS)
def deployed(request, state_root):
    stack = request.param
    shipped = stack_objects(stack)
    with control_plane(state_root / f"{stack}-engine", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, shipped, platform_only=True)
        made = engine(cp.tools, state_root / f"{stack}-engine" / "pulumi", f"existing-{stack}", cp.kubeconfig)
        made.write_stack(existing_cluster_config(stack, str(cp.kubeconfig)))
        yield stack, shipped, kube, made
        ENGINE_REPORT.append(f"== existing-cluster {stack} through pulumi: "
                             + ", ".join(f"{s.command.split()[0]} {s.seconds:.1f}s" for s in made.steps))


def test_preview_up_noop_replace_add_destroy(deployed):
    stack, shipped, kube, made = deployed
    planned = made.preview_steps()
    creates = {(s["type"], s["name"]) for s in planned if s["op"] == "create"}
    runs = [j["metadata"]["name"] for j in shipped.manifests("JobSet")]
    assert {(JOBSET, f"runs-{r}") for r in runs} <= creates, sorted(creates)
    assert not [s for s in planned if s["type"].startswith("gcp:")], "an existing-cluster stack declares no GCP resource"

    made.run("up", "--yes", "--skip-preview")
    for jobset in shipped.manifests("JobSet"):
        assert wait_bound(kube, jobset, TIMEOUT), jobset["metadata"]["name"]

    again = made.preview_steps()
    assert _changes(again) == [], f"a second preview changes nothing: {_changes(again)}"

    # One run's arguments changed: the engine replaces that run's JobSet and nothing else, and
    # the offline plan diff a reviewer reads says the same.
    config = made.read_stack()
    before = _offline_plan(made)
    changed = copy.deepcopy(config)
    first = changed["gke-finetune:runs"][0]
    first["args"] = [*first.get("args", []), "--seed", "7"]
    made.write_stack(changed)
    shown = made.run("preview", "--diff")
    assert "--seed" in shown.stdout and f"runs-{first['name']}" in shown.stdout, shown.stdout[-3000:]
    if stack == ENGINE_STACKS[0]:  # one stack's is enough to read (the stacks may run in several processes)
        DIFF_REPORT.append(f"== {stack}: one run's arguments changed (+ --seed 7), `pulumi preview --diff`:")
        DIFF_REPORT.extend(shown.stdout.rstrip().splitlines())
    steps = made.preview_steps()
    replaced = _changes(steps)
    assert replaced and {(t, n) for _, t, n in replaced} == {(JOBSET, f"runs-{first['name']}")}, replaced
    assert any(op.endswith("replace") or op == "replace" for op, _, _ in replaced), replaced
    after = _offline_plan(made)
    assert _offline_as_engine(before, after) == _engine_as_offline(steps)
    made.run("up", "--yes", "--skip-preview")
    if stack in CANCEL_STACKS:  # before a run is added that would take the cancelled run's nodes
        _cancel_and_resume(made, kube, shipped, first["name"])

    added = copy.deepcopy(changed)
    extra = {**copy.deepcopy(first), "name": f"{first['name'][:40]}-b"}
    added["gke-finetune:runs"].append(extra)
    made.write_stack(added)
    steps = made.preview_steps()
    assert _changes(steps) == [("create", JOBSET, f"runs-{extra['name']}")]
    assert _offline_as_engine(after, _offline_plan(made)) == _engine_as_offline(steps)
    made.run("up", "--yes", "--skip-preview")

    assert _left_by_pulumi(kube), "the objects the stack applied carry the provider's field manager"
    made.run("destroy", "--yes", "--skip-preview")
    assert _left_by_pulumi(kube) == []


def _queued_first_run(stack: str) -> bool:
    config = stack_objects(stack).config
    return config.contracts()[config.runs[0].pool].queue is not None


# `make cancel` / `make resume` through the engine on two stacks: the first whose first run is outside Kueue
# (suspended in place) and the first whose first run Kueue admits (not declared while suspended).
CANCEL_STACKS = tuple(next((s for s in ENGINE_STACKS if _queued_first_run(s) is queued), None)
                      for queued in (False, True)) if ENGINE_STACKS else ()


def _cancel_and_resume(made: Engine, kube, shipped, run: str) -> None:
    """Cancel then resume `run`: the stack file edited by one key, applied to that run alone, and the next
    preview changes nothing (the stop is declared, not undone)."""
    jobset = next(j for j in shipped.manifests("JobSet") if j["metadata"]["name"] == run)
    ns, queued = jobset["metadata"]["namespace"], _queued_first_run(shipped.stack)
    before = made.stack_file.read_text()
    done = run_tool("cancel", made.stack, made.workdir, made.env, "--run", run)
    assert done.returncode == 0, done.stdout + done.stderr
    edited = made.stack_file.read_text()
    assert [r.get("suspend") for r in made.read_stack()["gke-finetune:runs"] if r["name"] == run] == [True]
    assert len(edited) - len(before) == len(', "suspend": true'), "one key added, nothing else rewritten"
    if queued:  # Kueue's run is not declared while suspended: deleted, its quota freed
        wait_for(f"JobSet {run} deleted", lambda: kube.find(JOBSET_API, "JobSet", run, ns) is None, TIMEOUT)
    else:
        assert kube.get(JOBSET_API, "JobSet", run, ns)["spec"]["suspend"] is True
    wait_for(f"{run}'s pods gone", lambda: not kube.list("v1", "Pod", ns, labels=f"{JOBSET_NAME_LABEL}={run}"), TIMEOUT)
    assert _changes(made.preview_steps()) == [], "the next preview keeps the run stopped"
    done = run_tool("resume", made.stack, made.workdir, made.env, "--run", run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert made.stack_file.read_text() == before
    assert kube.get(JOBSET_API, "JobSet", run, ns)["spec"].get("suspend") in (False, None) or queued
    assert wait_bound(kube, jobset, TIMEOUT)  # the file is as before: the flow's next preview checks the rest


def test_a_bare_pulumi_and_make_use_the_same_state(state_root):
    """Pulumi.yaml's backend: `make`'s pulumi and a bare `pulumi` in the repository root, with no
    PULUMI_BACKEND_URL, both keep their stacks in .pulumi-state/ (created when missing)."""
    workdir = state_root / "bare-pulumi"
    copy_program(workdir / "program")
    program = workdir / "program"
    env = {**os.environ, "HOME": str(workdir), **engine_env(tools(), workdir, workdir / "no-kubeconfig")}
    env.pop("PULUMI_BACKEND_URL")
    bare = subprocess.run(["pulumi", "stack", "init", "bare", "--non-interactive"], cwd=program, env=env,
                          capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stdout + bare.stderr
    assert (program / ".pulumi-state" / ".pulumi").is_dir()  # created by the CLI itself
    made = subprocess.run(["make", "-s", "-o", ".venv/.installed", "_stack", "STACK=from-make"], cwd=program, env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    listed = subprocess.run(["pulumi", "stack", "ls", "--json"], cwd=program, env=env, capture_output=True, text=True,
                            timeout=300)
    assert sorted(s["name"] for s in json.loads(listed.stdout)) == ["bare", "from-make"], listed.stdout + listed.stderr


# A program made wrong on purpose, in the work directory's copy only: the
# first lines of its __main__.py wrap manifests.run.build_run before the
# components import it. (name, mutation of the run's manifest, stack change,
# what the engine must print: the API server's, the provider's or the program's own words.)
WRONG_PROGRAMS = {
    # The API server's structured-merge-diff, on the provider's server-side dry run.
    "field of the wrong type": ('m["spec"]["replicatedJobs"][0]["replicas"] = "two"', None,
                                r"replicas: expected numeric \(int or float\), got string"),
    "unknown field in a manifest": ('m["spec"]["notAField"] = True', None,
                                    r"\.spec\.notAField: field not declared in schema"),
    # A tag on purpose: the program must refuse it (runs pin images by digest).
    "image not a digest": (None, "us-docker.pkg.dev/e2e/finetune/trainer:latest",
                           r"is not a digest reference"),
}
PRELUDE = """import manifests.run as _run
_build = _run.build_run
def _wrong(*args, **kwargs):
    m = _build(*args, **kwargs)
    {mutation}
    return m
_run.build_run = _wrong
"""


@pytest.fixture(scope="module")
def platform_only(state_root):
    """The first engine stack's nodes and controllers, with nothing of the stack applied."""
    stack = ENGINE_STACKS[0]
    shipped = stack_objects(stack)
    with control_plane(state_root / "engine-wrong", LIFETIME) as cp:
        install_stack(cp, cp.client(), shipped, platform_only=True)
        yield stack, shipped, cp


@pytest.mark.parametrize("case", sorted(WRONG_PROGRAMS))
def test_a_wrong_program_fails_preview_with_the_engine_s_own_message(platform_only, state_root, case):
    stack, shipped, cp = platform_only
    mutation, image, expected = WRONG_PROGRAMS[case]
    made = engine(cp.tools, state_root / "engine-wrong" / case.replace(" ", "-"), f"existing-{stack}",
                  cp.kubeconfig)
    config = existing_cluster_config(stack, str(cp.kubeconfig))
    if image:
        config["gke-finetune:images"] = {t: image for t in config["gke-finetune:images"]}
    if mutation:
        main = made.workdir / "__main__.py"
        main.write_text(PRELUDE.format(mutation=mutation) + main.read_text())
    made.write_stack(config)
    step = made.run("preview", check=False)
    assert step.returncode != 0, f"{case}: pulumi preview succeeded:\n{step.output[-3000:]}"
    assert re.search(expected, step.output), f"{case}:\n{step.output[-3000:]}"
    WRONG_REPORT.append(f"== {case}: pulumi preview exited {step.returncode}: "
                        + " | ".join(line.strip() for line in step.output.splitlines()
                                     if re.search(expected, line))[:600])


# The API server's words when a webhook with failurePolicy Fail can't be called
# (k8s.io/apiserver v0.35.4 pkg/admission/plugin/webhook/errors: "failed calling webhook").
WEBHOOK_DOWN = r'failed calling webhook "[^"]*jobset[^"]*"'


def _state_resources(made: Engine) -> tuple[list[dict], list]:
    """The resources in the stack's state, and its pending operations (what an interrupted update leaves)."""
    exported = json.loads(made.run("stack", "export").stdout)["deployment"]
    return exported.get("resources") or [], exported.get("pending_operations") or []


def _missing_from_cluster(kube, resources: list[dict]) -> list[str]:
    """The Kubernetes objects the state holds that the cluster doesn't."""
    missing = []
    for r in resources:
        kind = r["type"].split(":")
        if len(kind) != 3 or kind[0] != "kubernetes" or kind[1].startswith(("helm.sh", "providers")):
            continue
        group_version, name = kind[1].replace("core/", ""), r.get("outputs", {}).get("metadata", {})
        if kube.find(group_version, kind[2], name.get("name", ""), name.get("namespace")) is None:
            missing.append(r["urn"])
    return missing


def test_up_with_the_jobset_webhook_down_fails_clearly_and_a_retry_applies_the_rest(platform_only, state_root):
    """The JobSet manager (its webhooks) down while `pulumi up` applies a run: up fails naming the
    webhook, nothing is left half-applied (no JobSet in the cluster or the state, no pending
    operation, everything else both in the cluster and in the state), and once the manager is back
    a second up creates the run and nothing else, after which a preview changes nothing."""
    stack, shipped, cp = platform_only
    kube = cp.client()
    made = engine(cp.tools, state_root / "engine-webhook", f"existing-{stack}", cp.kubeconfig)
    made.write_stack(existing_cluster_config(stack, str(cp.kubeconfig)))
    faults.kill(cp, "jobset-manager")
    try:
        failed = made.run("up", "--yes", "--skip-preview", check=False)
    finally:
        faults.start(cp, "jobset-manager")
    assert failed.returncode != 0, failed.output[-3000:]
    said = [line.strip() for line in failed.output.splitlines() if re.search(WEBHOOK_DOWN, line)]
    assert said, failed.output[-3000:]
    resources, pending = _state_resources(made)
    assert pending == [], pending
    assert not [r["urn"] for r in resources if r["type"] == JOBSET], "a JobSet in the state"
    assert not kube.list("jobset.x-k8s.io/v1alpha2", "JobSet"), "a JobSet was created after all"
    assert _missing_from_cluster(kube, resources) == []
    in_state = [r for r in resources if r["type"].startswith("kubernetes:") and "providers" not in r["type"]]
    left = _left_by_pulumi(kube)
    assert left, "up applied nothing before the JobSet"
    retried = made.preview_steps()
    creates = _changes(retried)
    assert creates and {op for op, _, _ in creates} == {"create"}, creates
    assert {t for _, t, _ in creates} == {JOBSET}, f"only the runs are left to create: {creates}"
    made.run("up", "--yes", "--skip-preview")
    for jobset in shipped.manifests("JobSet"):
        assert wait_bound(kube, jobset, TIMEOUT), jobset["metadata"]["name"]
    assert _changes(made.preview_steps()) == []
    WEBHOOK_REPORT.append(f"== {stack}: pulumi up with the JobSet manager down exited {failed.returncode}: "
                          + " | ".join(said)[:600])
    WEBHOOK_REPORT.append(f"   left in the state and the cluster after it: {len(in_state)} resources, "
                          f"{len(left)} objects; the retry created {[n for _, _, n in creates]}")
