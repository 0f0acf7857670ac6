"""The workflows' guards: a GitHub environment's protection (tools/ci.py) and the team's state backend
(tools/backend.py, `make backend`), each failing with one line naming the setting, the value and the fix."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from githubkit_schemas.latest import models as github

from tests.support.checkout import ROOT
from tools import backend, ci

# GitHub's Environment as GET /repos/{owner}/{repo}/environments/{name} returns it, checked against the
# REST API's schema (githubkit's models, generated from github/rest-api-description).
BASE = {"id": 161088068, "node_id": "MDExOkVudmlyb25tZW50MTYxMDg4MDY4", "name": "preview",
        "url": "https://api.github.com/repos/o/r/environments/preview",
        "html_url": "https://github.com/o/r/deployments/activity_log?environments_filter=preview",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
REVIEWERS = {"id": 3755, "node_id": "MDQ6R2F0ZTM3NTU=", "type": "required_reviewers", "prevent_self_review": True,
             "reviewers": [{"type": "Team", "reviewer": {"id": 1, "node_id": "MDQ6VGVhbTE=", "name": "ml-platform",
                                                         "slug": "ml-platform"}}]}
WAIT = {"id": 3736, "node_id": "MDQ6R2F0ZTM3MzY=", "type": "wait_timer", "wait_timer": 30}
BRANCHES = {"protected_branches": True, "custom_branch_policies": False}


def environment(**fields) -> dict:
    env = {**BASE, **fields}
    github.Environment.model_validate(env)
    return env


@pytest.mark.parametrize("env, problem", [
    (environment(protection_rules=[REVIEWERS]), None),
    (environment(), "protection_rules [] has no required_reviewers rule"),
    (environment(protection_rules=[WAIT]), "protection_rules ['wait_timer'] has no required_reviewers rule"),
    (environment(protection_rules=[{**REVIEWERS, "reviewers": []}]), "has no required_reviewers rule with a reviewer"),
    (environment(protection_rules=[{**REVIEWERS, "prevent_self_review": False}]),
     "required_reviewers.prevent_self_review is false"),
])  # fmt: skip
def test_the_preview_environment_needs_reviewers_other_than_the_author(env, problem):
    found = ci.judge("preview", 200, env, reviewers=True, main_only=False)
    assert found is None if problem is None else (problem in found and "fix: Settings → Environments → preview" in found)


@pytest.mark.parametrize("policy, ok", [(BRANCHES, True), ({"protected_branches": False,
                                                            "custom_branch_policies": True}, True), (None, False)])
def test_a_deploy_environment_deploys_from_chosen_branches_only(policy, ok):
    found = ci.judge("dev", 200, environment(name="dev", deployment_branch_policy=policy), False, main_only=True)
    assert (found is None) == ok
    assert ok or "deployment_branch_policy is null" in found


def test_a_missing_environment_or_a_refused_read_names_the_fix():
    assert "does not exist (HTTP 404); fix: create it" in ci.judge("preview", 404, {}, True, False)
    assert "permissions: actions: read" in ci.judge("preview", 403, {}, True, False)


def test_the_command_exits_78_with_one_line(tmp_path, capsys):
    (tmp_path / "env.json").write_text(json.dumps(environment(protection_rules=[WAIT])))
    assert ci.main(["environment", "preview", "--reviewers", "--answer", str(tmp_path / "env.json")]) == 78
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("ci: environment 'preview': protection_rules")
    (tmp_path / "env.json").write_text(json.dumps(environment(protection_rules=[REVIEWERS])))
    assert ci.main(["environment", "preview", "--reviewers", "--answer", str(tmp_path / "env.json")]) == 0


# --- the state backend -----------------------------------------------------------------------------


def test_make_backend_prints_the_commands_and_runs_nothing_by_default():
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "backend", "PROJECT=ml-team-prod",
                           "LOCATION=us-central1", "TEAM=group:ml@example.com"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "dry run: APPLY=1 runs these" in lines[0]
    assert ("  gcloud storage buckets create gs://ml-team-prod-pulumi-state --project=ml-team-prod "
            "--location=us-central1 --uniform-bucket-level-access --public-access-prevention") in lines
    assert "  gcloud storage buckets update gs://ml-team-prod-pulumi-state --versioning" in lines
    grants = [line for line in lines if "add-iam-policy-binding" in line]
    assert [g.split("--member=")[1] for g in grants] == [
        "serviceAccount:pulumi-deploy@ml-team-prod.iam.gserviceaccount.com --role=roles/storage.objectAdmin",
        "serviceAccount:pulumi-preview@ml-team-prod.iam.gserviceaccount.com --role=roles/storage.objectViewer",
        "group:ml@example.com --role=roles/storage.objectAdmin"]


def test_apply_runs_the_commands_in_order_and_stops_at_the_first_that_fails(tmp_path):
    log = tmp_path / "calls"
    gcloud = tmp_path / "gcloud"
    gcloud.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$*" in *--versioning*) exit 3;; esac\n')
    gcloud.chmod(gcloud.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "tools.backend", "setup", "--project", "ml-team-prod", "--location",
                           "us-central1", "--apply"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert [line.split()[2] for line in log.read_text().splitlines()] == ["create", "update"]
    assert "nothing after it was run" in done.stderr


@pytest.mark.parametrize("args, key", [
    (["--project", "Bad Project", "--location", "us-central1"], "--project: 'Bad Project'"),
    (["--project", "ml-team-prod", "--location", "us central"], "--location: 'us central'"),
    (["--project", "ml-team-prod", "--location", "us", "--bucket", "B!"], "--bucket: 'B!'"),
    (["--project", "ml-team-prod", "--location", "us", "--team", "ana@example.com"], "--team: 'ana@example.com'"),
])  # fmt: skip
def test_bad_input_names_the_option_the_value_and_what_is_allowed(args, key, capsys):
    assert backend.main(["setup", *args]) == 78
    err = capsys.readouterr().err
    assert err.startswith(f"backend: {key} is not") and "allowed:" in err


@pytest.mark.parametrize("url, ok", [("gs://ml-team-prod-pulumi-state", True), ("gs://b/team-a", True),
                                     ("file://.pulumi-state?create_dir=true", False), ("", False),
                                     ("/home/runner/state", False)])
def test_the_deploy_workflows_refuse_a_local_backend(url, ok, capsys):
    assert backend.main(["check", "--url", url]) == (0 if ok else 78)
    assert ok or "PULUMI_BACKEND_URL" in capsys.readouterr().err


def test_the_plan_warns_when_a_workflow_deploys_a_stack_whose_backend_here_is_local(tmp_path, monkeypatch):
    (tmp_path / "deploy").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.dev.yaml").write_text((ROOT / "Pulumi.dev.yaml").read_text())
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    (tmp_path / "deploy" / "stacks.txt").write_text("# deployed\n")
    assert backend.deployed_from_local("dev", tmp_path) is None  # not deployed by CI
    (tmp_path / "deploy" / "stacks.txt").write_text("dev\n")
    warning = backend.deployed_from_local("dev", tmp_path)
    assert warning.startswith("warning: stack dev is deployed by .github/workflows/deploy.yml")
    assert "'file://.pulumi-state?create_dir=true', a local directory" in warning and "make backend" in warning
    monkeypatch.setenv("PULUMI_BACKEND_URL", "gs://team-state")
    assert backend.deployed_from_local("dev", tmp_path) is None


def test_make_plan_prints_the_warning_first(tmp_path):
    from tests.tools.test_plan import _copy_tree, _plan_cli

    tree = _copy_tree(tmp_path / "tree")
    (tree / "deploy").mkdir(exist_ok=True)
    (tree / "deploy" / "stacks.txt").write_text("dev\n")
    env_backend = os.environ.pop("PULUMI_BACKEND_URL", None)
    try:
        result = _plan_cli(tree, "show", "--stack", "dev", "--out", str(tmp_path / "m"))
    finally:
        if env_backend is not None:
            os.environ["PULUMI_BACKEND_URL"] = env_backend
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("warning: stack dev is deployed by .github/workflows/deploy.yml")
