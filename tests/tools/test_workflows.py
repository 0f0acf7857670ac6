"""The GitHub Actions workflows, read as data, and the stack selection they rely on."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools import stacks
from tools.offline import ROOT, SHIPPED_STACKS

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ids = [p.stem for p in WORKFLOWS]


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on` key as true
    return data


def _steps(workflow: dict):
    for job_id, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^([A-Z_0-9]+) :?= (\S+)\s*$", text, re.M))
    targets = set()
    for match in re.finditer(r"^([^\s#=:][^=:]*?):(?!=)", text, re.M):
        for target in match.group(1).split():
            targets.add(re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), target))
    return targets


def _make_invocations(run: str) -> list[list[str]]:
    calls = []
    for line in run.replace("\\\n", " ").splitlines():
        for part in re.split(r"\|\||&&|\||;", line):
            words = shlex.split(part.strip(), comments=True) if part.strip() else []
            if words and words[0] == "make":
                calls.append(words[1:])
    return calls


def test_there_are_pull_request_deploy_and_destroy_workflows():
    assert {"pull-request", "deploy", "destroy"} <= set(ids)


@pytest.mark.parametrize("path", WORKFLOWS, ids=ids)
def test_workflow_loads_with_jobs_and_steps(path):
    workflow = _load(path)
    assert workflow["name"] and workflow["on"] and workflow["jobs"]
    for job_id, job in workflow["jobs"].items():
        assert job.get("runs-on", "").startswith("ubuntu-"), job_id
        assert job["steps"], job_id
        for need in job.get("needs", []):
            assert need in workflow["jobs"], (job_id, need)


@pytest.mark.parametrize("path", WORKFLOWS, ids=ids)
def test_make_calls_name_existing_targets(path):
    targets = _make_targets()
    calls = [c for _, step in _steps(_load(path)) for c in _make_invocations(step.get("run", ""))]
    assert calls, "every workflow works through the Makefile"
    for args in calls:
        goals = [a for a in args if not a.startswith("-") and "=" not in a]
        assert goals, args
        for goal in goals:
            assert goal in targets, f"make {goal}: no such target in the Makefile"


def test_make_target_parser_sees_the_real_targets():
    targets = _make_targets()
    assert {"test", "test-infra", "plan", "plan-diff", "up", "destroy", "venv", ".venv/.installed"} <= targets
    assert "PIP_VERSION" not in targets and "STACK" not in targets


@pytest.mark.parametrize("path", WORKFLOWS, ids=ids)
def test_actions_are_pinned_to_exact_versions(path):
    for job_id, step in _steps(_load(path)):
        if "uses" in step:
            action, _, version = step["uses"].partition("@")
            assert re.fullmatch(r"v\d+\.\d+\.\d+|[0-9a-f]{40}", version), (job_id, step["uses"])


@pytest.mark.parametrize("path", WORKFLOWS, ids=ids)
def test_python_modules_run_by_steps_exist(path):
    for _, step in _steps(_load(path)):
        for module in re.findall(r"python -m ([\w.]+)", step.get("run", "")):
            assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module


def test_pull_request_workflow_tests_previews_and_falls_back_offline():
    workflow = _load(ROOT / ".github/workflows/pull-request.yml")
    assert "pull_request" in workflow["on"]
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    perms = jobs["preview"]["permissions"]
    assert perms == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert jobs["plan-diff"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    test_calls = [c for s in jobs["test"]["steps"] for c in _make_invocations(s.get("run", ""))]
    assert [c[0] for c in test_calls] == ["test"]
    # the cloud preview, commented on the pull request, after the tests
    assert "test" in jobs["preview"]["needs"]
    (pulumi,) = [s for s in jobs["preview"]["steps"] if s.get("uses", "").startswith("pulumi/actions@")
                 and "command" in s.get("with", {})]
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True and pulumi["with"]["diff"] is True
    assert pulumi["with"]["refresh"] is False  # a refresh reads Kubernetes Secrets, which the previewer may not
    (auth,) = [s for s in jobs["preview"]["steps"] if s.get("uses", "").startswith("google-github-actions/auth@")]
    assert "workload_identity_provider" in auth["with"] and "credentials_json" not in auth["with"]
    # no credentials (unset variable, fork): the offline plan diff instead
    select = " ".join(s.get("run", "") + json.dumps(s.get("env", {})) for s in jobs["stacks"]["steps"])
    assert "vars.GCP_PREVIEW_WORKLOAD_IDENTITY_PROVIDER != ''" in select
    assert "head.repo.full_name == github.repository" in select
    runs = " ".join(s.get("run", "") for s in jobs["plan-diff"]["steps"])
    assert "make -s plan-diff" in runs and "GITHUB_STEP_SUMMARY" in runs


def test_deploy_workflow_runs_up_for_the_deployed_stacks_on_main():
    workflow = _load(ROOT / ".github/workflows/deploy.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    up = workflow["jobs"]["up"]
    assert up["permissions"]["id-token"] == "write"
    assert set(up["needs"]) == {"test", "stacks"}
    assert "fromJSON(needs.stacks.outputs.deployed)" in up["strategy"]["matrix"]["stack"]
    (pulumi,) = [s for s in up["steps"] if s.get("uses", "").startswith("pulumi/actions@")
                 and "command" in s.get("with", {})]
    assert pulumi["with"]["command"] == "up"


def test_the_deploy_job_pins_the_cli_checks_its_backend_and_environment_and_holds_no_token():
    job = _load(ROOT / ".github/workflows/deploy.yml")["jobs"]["up"]
    assert job["environment"] == "${{ matrix.stack }}"
    steps = job["steps"]
    (install,) = [s for s in steps if s.get("uses", "").startswith("pulumi/actions@") and "command" not in s["with"]]
    assert install["with"]["pulumi-version"] == "^3.187.0"
    (guard,) = [s for s in steps if "tools.backend check" in s.get("run", "")]
    assert '.venv/bin/python -m tools.ci environment "$STACK" --main-only' in guard["run"]
    assert job["permissions"]["actions"] == "read"  # GET the environment (tools/ci.py)
    order = [s.get("name") or s.get("uses") for s in steps]
    command = next(i for i, s in enumerate(steps) if "command" in s.get("with", {}))
    assert order.index(guard["name"]) < command
    assert "HF_TOKEN" not in json.dumps(job) and "hfToken" not in json.dumps(job)


def test_the_preview_job_pins_the_cli_and_sets_no_token():
    job = _load(ROOT / ".github/workflows/pull-request.yml")["jobs"]["preview"]
    (install,) = [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")
                  and "command" not in s["with"]]
    assert install["with"]["pulumi-version"] == "^3.187.0"
    assert "HF_TOKEN" not in json.dumps(job) and "hfToken" not in json.dumps(job)


def test_destroy_workflow_is_manual_for_one_confirmed_stack():
    workflow = _load(ROOT / ".github/workflows/destroy.yml")
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["required"] and inputs["confirm"]["required"]
    job = workflow["jobs"]["destroy"]
    assert job["if"] == "inputs.stack == inputs.confirm && github.ref == 'refs/heads/main'"
    assert job["environment"] == "${{ inputs.stack }}" and job["permissions"]["id-token"] == "write"


# --- stack selection --------------------------------------------------------------------


@pytest.mark.parametrize(
    "changed, expected",
    [
        (["Pulumi.dev.yaml"], ["dev"]),
        (["Pulumi.dev.yaml", "Pulumi.a4.yaml", "README.md"], ["a4", "dev"]),
        (["README.md", "tests/stack/test_x.py", ".github/workflows/x.yml", "tools/plan/collect.py"], []),
        (["docs/capacity.md", "docs/own-data.md"], []),  # the documentation declares nothing
        (["components/node_pools.py"], sorted(SHIPPED_STACKS)), (["core/catalog.py"], sorted(SHIPPED_STACKS)),
        (["trainers/trl_gpu/sft.py"], sorted(SHIPPED_STACKS)),  # a new image and replaced runs
        (["docker/gemma-jax/Dockerfile", "Pulumi.dev.yaml"], sorted(SHIPPED_STACKS)),
        (["Pulumi.yaml"], sorted(SHIPPED_STACKS)),
        (["Pulumi.gone.yaml"], []),  # a stack file removed by the change
    ],
)
def test_affected_stacks(changed, expected):
    assert stacks.affected_by(changed, list(SHIPPED_STACKS)) == expected


def test_deployed_stacks_file(tmp_path):
    assert all(s in stacks.stack_files() for s in stacks.deployed())
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy/stacks.txt").write_text("# comment\nprod  # the real one\n\n")
    (tmp_path / "Pulumi.prod.yaml").write_text("config:\n  gcp:region: europe-west4\n")
    assert stacks.deployed(tmp_path) == ["prod"]
    assert stacks.region("prod", tmp_path) == "europe-west4"
    (tmp_path / "deploy/stacks.txt").write_text("prod\nmissing\n")
    with pytest.raises(SystemExit, match="missing"):
        stacks.deployed(tmp_path)


def test_stacks_cli_runs_on_the_standard_library_alone():
    """The workflows call it before any environment is installed."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "tools.stacks", "region", "dev"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == stacks.region("dev")
