"""`make doctor`'s bucket check (tools/doctor/bucket.py) against recorded answers built from the Cloud Storage JSON
API's documented responses (tests/support/bucket_answers.py, each checked against the discovery document)."""

from __future__ import annotations

import json

import pytest

from components.bucket_preflight import API
from stack.reader import file_values, model_values, validate
from tests.support import bucket_answers as a
from tests.support.pulumi_harness import ROOT
from tools.doctor.answers import Recorded
from tools.doctor.bucket import bucket_findings

TEAM, DEV, RUN = "my-project-id-team-finetune", "my-project-id-dev-finetune", "gemma3-single-host"
EXISTING_FOLDERS = ["datasets/existing-dev/", "datasets/existing-dev/tinystories/", "checkpoints/existing-dev/",
                    f"checkpoints/existing-dev/{RUN}/", "profiles/existing-dev/", f"profiles/existing-dev/{RUN}/"]


def config(stack: str, **overrides):
    values = file_values(stack, ROOT)
    values.update({f"gke-finetune:{k}": v for k, v in overrides.items()})
    return validate(model_values(values, stack))


def existing(grants: bool):
    cluster = {"context": "gke_my-project-id_us-east5_team-cluster", "controllers": "install", "bucketGrants": grants}
    return config("existing-dev", existingCluster=cluster, projectNumber="123456789012")


def recorded(tmp_path, answers: dict) -> Recorded:
    """A `--record` file of these answers (path below storage/v1 -> (status, body))."""
    requests = {f"{API}/{path}": {"status": status, "body": body, "error": ""} for path, (status, body) in answers.items()}
    (tmp_path / "answers.json").write_text(json.dumps({"commands": {}, "requests": requests}))
    return Recorded(tmp_path / "answers.json")


def team_answers(bucket: dict, *folders: str) -> dict:
    paths = a.bucket_paths(TEAM)
    found = {paths["bucket"]: (200, bucket), paths["iam"]: (200, a.policy())}
    for top in ("checkpoints/", "datasets/", "profiles/"):
        found[f"b/{TEAM}/folders/{a.q(top)}"] = (200, a.folder(top))
        found[f"b/{TEAM}/folders?prefix={a.q(top + 'existing-dev/')}"] = (200, a.folders(
            *[f for f in folders if f.startswith(top)]))
    return found


def test_a_bucket_set_up_as_the_stack_needs_passes(tmp_path):
    answers = recorded(tmp_path, team_answers(a.bucket(TEAM), *EXISTING_FOLDERS))
    [found] = bucket_findings(answers, existing(grants=False), "token")
    assert (found.check, found.status, found.detail) == (
        "bucket", "ok", f"gs://{TEAM}: uniform bucket-level access, public access prevention enforced, in US-EAST5 "
        "(region)")


def test_without_uniform_access_a_stack_that_grants_is_a_miss_naming_the_setting_and_the_fix(tmp_path):
    answers = recorded(tmp_path, team_answers(a.bucket(TEAM, uniform=False, hierarchical=False)))
    [found] = bucket_findings(answers, existing(grants=True), "token")
    assert found.status == "MISS"
    assert found.detail.startswith(f"bucketName: {TEAM!r} has uniform bucket-level access off "
                                   "(iamConfiguration.uniformBucketLevelAccess.enabled: false)")
    assert found.fix == (f"a bucket with uniform bucket-level access: `gcloud storage buckets update gs://{TEAM} "
                         "--uniform-bucket-level-access` (ACLs stop applying)")


@pytest.mark.parametrize("bucket, check, words, fix", [
    (a.bucket(TEAM, prevention="inherited"), "bucket", "iamConfiguration.publicAccessPrevention: 'inherited'",
     f"`gcloud storage buckets update gs://{TEAM} --public-access-prevention`"),
    (a.bucket(TEAM, location="EU", location_type="multi-region"), "bucket", "location: 'EU' (multi-region)",
     "a bucket in us-east5 (bucketName), or the cluster in the bucket's region"),
])
def test_what_to_change_is_a_warning_with_the_fix(tmp_path, bucket, check, words, fix):
    [found] = bucket_findings(recorded(tmp_path, team_answers(bucket, *EXISTING_FOLDERS)), existing(False), "token")
    assert (found.check, found.status, found.fix) == (check, "warn", fix) and found.detail.startswith(words)


def test_missing_folders_of_the_platform_team_s_bucket_are_a_warning_with_the_command(tmp_path):
    [found] = bucket_findings(recorded(tmp_path, team_answers(a.bucket(TEAM))), existing(False), "token")
    assert found.status == "warn" and "`gcloud storage folders create --recursive " in found.detail


def test_an_existing_bucket_that_is_not_there_is_a_miss(tmp_path):
    answers = recorded(tmp_path, {a.bucket_paths(TEAM)["bucket"]: (404, a.error(404, "Not Found"))})
    [found] = bucket_findings(answers, existing(False), "token")
    assert found.status == "MISS" and found.detail == f"bucketName: {TEAM!r} does not exist (buckets.get: 404)"


def test_a_run_deployed_before_prefixes_carried_the_stack_is_a_warning_naming_make_migrate(tmp_path):
    trainer = a.principal("finetune", "dev-trainer")
    answers = {a.bucket_paths(DEV)["bucket"]: (200, a.bucket(DEV, hierarchical=False)),
               a.bucket_paths(DEV)["iam"]: (200, a.policy(a.write_binding(DEV, trainer, [f"checkpoints/{RUN}"]))),
               a.listed(DEV, f"checkpoints/{RUN}/"): (200, a.objects(f"checkpoints/{RUN}/10/state")),
               a.listed(DEV, f"checkpoints/dev/{RUN}/"): (200, a.objects())}
    [found] = bucket_findings(recorded(tmp_path, answers), config("dev"), "token")
    assert (found.check, found.status) == (f"run {RUN}", "warn")
    assert found.fix == (f"`make cancel`, `make migrate STACK=dev RUN={RUN}`, then `make resume`: it moves to "
                         f"checkpoints/dev/{RUN}/")


def test_no_token_no_check():
    assert bucket_findings(None, config("dev"), "")[0].status == "skip"
