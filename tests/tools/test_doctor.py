"""`make doctor`: each check's logic against recorded answers of the programs and APIs (tests/tools/doctor/),
the report for a stack with every check failing and with every check passing, and that it only reads."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stack.reader import load_files
from tests.support import google_answers as google
from tests.support.pulumi_harness import ROOT
from admission.google_api import validate
from tools.doctor import checks, quotas
from tools.doctor import permissions as deploy
from tools.doctor import token_secret
from tools.doctor.answers import post_key
from tools.doctor.__main__ import main, report
from tools.doctor.answers import Got, Live, Ran, Recorded
from tools.doctor.stack_checks import all_findings, hub_models, needed_quota, stack_requests

HERE = Path(__file__).parent / "doctor"
ON_DEMAND, PREEMPTIBLE = "TPUS-PER-TPU-FAMILY-per-project-region", "PREEMPTIBLE-TPU-V6E-per-project-region"
CT6E = {"tpu_family": "CT6E"}
OTHER_REGIONS = ["europe-west4", "us-east5", "asia-northeast1"]


def _quotas(on_demand: int, preemptible: int) -> dict:
    """The doctor stack's two TPU quotas as Cloud Quotas answers: the region's value, then the default
    that applies everywhere else."""
    return {
        quotas.info_url(google.PROJECT, ON_DEMAND): (200, google.quota_info(ON_DEMAND, ["region", "tpu_family"], [
            ({"region": google.REGION, **CT6E}, on_demand, [google.REGION]), ({}, 0, OTHER_REGIONS)])),
        quotas.info_url(google.PROJECT, PREEMPTIBLE): (200, google.quota_info(PREEMPTIBLE, ["region"], [
            ({"region": google.REGION}, preemptible, [google.REGION]), ({}, 0, OTHER_REGIONS)])),
    }


def _held(root_of_files: Path, lacking: tuple[str, ...] = ()) -> dict:
    """Resource Manager's answer to the doctor's testIamPermissions: every permission the doctor stack
    needs but `lacking`, the request and the answer both checked against cloudresourcemanager's
    discovery document."""
    needs = sorted(deploy.project_needs(stack_requests(load_files("doctor", root_of_files), root_of_files)))
    body = {"permissions": needs}
    assert validate.body_violations(deploy.API, deploy.METHOD, body) == []
    answer = google.response(deploy.API, deploy.METHOD, {"permissions": [p for p in needs if p not in lacking]})
    return {post_key(deploy.url(google.PROJECT), body): (200, answer)}


# What the project-not-ready identity lacks: the Compute roles a network and a firewall rule need.
LACKING = ("compute.firewalls.create", "compute.networks.updatePolicy", "compute.routers.create")

TOKEN_VERSION = "projects/ml-team-prod/secrets/hf-token/versions/latest"
ACCESS_METHOD = "secretmanager.projects.secrets.versions.access"


def _token_secret(token: str = "hf_" + "x" * 34) -> dict:
    """The stack's token secret's latest version, as Secret Manager's `access` returns it."""
    body = {"name": TOKEN_VERSION.replace("latest", "1").replace("ml-team-prod", google.PROJECT_NUMBER),
            "payload": {"data": base64.b64encode(token.encode()).decode(), "dataCrc32c": "1234567"}}
    return {token_secret.access_url(TOKEN_VERSION): (200, google.response("secretmanager.v1", ACCESS_METHOD, body))}


# The Google answers of each recorded scenario, built from Google's definitions (tests/support/google_answers.py).
SCENARIOS = {
    "ready": {**_quotas(on_demand=16, preemptible=64), **_token_secret()},
    "project-not-ready": {
        **_quotas(on_demand=0, preemptible=4), **_token_secret(),
        quotas.pending_url(google.PROJECT): (200, google.quota_preferences(
            (PREEMPTIBLE, {"region": google.REGION}, 8))),
    },
    "nothing-set-up": {},
}


def scenario(name: str, target_dir: Path, **extra) -> Path:
    held = {} if name == "nothing-set-up" else _held(target_dir, LACKING if name == "project-not-ready" else ())
    return google.answers(name, target_dir / f"{name}.json", {**SCENARIOS[name], **held, **extra})


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path)
    shutil.copy(HERE / "Pulumi.doctor.yaml", tmp_path)
    return tmp_path


def findings(root: Path, answers: str, **extra) -> dict[str, checks.Finding]:
    found = all_findings(Recorded(scenario(answers, root, **extra)), load_files("doctor", root), root)
    return {f.check: f for f in found}


def statuses(root: Path, answers: str) -> dict[str, str]:
    return {check: f.status for check, f in findings(root, answers).items()}


def test_every_check_passes_on_a_ready_machine_and_project(root):
    found = statuses(root, "ready")
    assert set(found.values()) == {"ok"}, found
    assert set(found) == {"project", "Pulumi CLI", "gcloud credentials", "Application Default Credentials",
                          "gke-gcloud-auth-plugin", "image builder", "project APIs", "deploy permissions",
                          "quota tpu-v6e preemptible",
                          "quota tpu-v6e on-demand", "reservation a4-reservation", "bucket",
                          "Hugging Face google/gemma-4-31B-it"}


def test_every_project_check_fails_on_a_project_not_ready(root):
    found = statuses(root, "project-not-ready")
    assert {c for c, s in found.items() if s == "MISS"} == {
        "project APIs", "deploy permissions", "quota tpu-v6e preemptible", "quota tpu-v6e on-demand",
        "reservation a4-reservation", "bucket", "Hugging Face google/gemma-4-31B-it"}


def test_every_machine_check_fails_on_a_machine_with_nothing_set_up(root):
    found = statuses(root, "nothing-set-up")
    assert {c for c, s in found.items() if s == "MISS"} == {
        "Pulumi CLI", "gcloud credentials", "Application Default Credentials", "gke-gcloud-auth-plugin",
        "image builder", "Hugging Face google/gemma-4-31B-it"}
    assert {c for c, s in found.items() if s == "skip"} == {"project APIs", "quota", "reservation a4-reservation",
                                                            "bucket"}


def test_the_report_says_each_fix_and_the_exit_code_says_whether_to_fix(root, capsys):
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(scenario("ready", root))]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "all 13 checks pass or do not apply"
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(scenario("project-not-ready", root))]) == 1
    out = capsys.readouterr().out
    assert ("fix: `gcloud quotas preferences create --service=compute.googleapis.com --project=ml-team-prod "
            f"--quota-id={ON_DEMAND} --preferred-value=2 --dimensions=region=us-central1,tpu_family=CT6E "
            "--email=<your email>`") in out
    assert f"{PREEMPTIBLE}: 4 in us-central1, the pools can scale to 8; a request for 8 is pending" in out
    assert "fix: accept its licence at https://huggingface.co/google/gemma-4-31B-it" in out
    assert ("3 of 54 missing on ml-team-prod: roles/compute.networkAdmin (compute.routers.create); "
            "roles/compute.securityAdmin (compute.firewalls.create, compute.networks.updatePolicy)") in out
    assert ("fix: `gcloud projects add-iam-policy-binding ml-team-prod --role=roles/compute.networkAdmin "
            "--member=user:ana@example.com && gcloud projects add-iam-policy-binding ml-team-prod "
            "--role=roles/compute.securityAdmin --member=user:ana@example.com`") in out
    assert "fix: a name of the stack's own: `gke-finetune:bucketName` in the stack file" in out
    assert out.splitlines()[-1] == "7 of 13 checks need you"


def test_an_invalid_stack_exits_78(root, capsys):
    answers = scenario("ready", root)
    (root / "Pulumi.doctor.yaml").write_text("config:\n  gcp:project: x\n")
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(answers)]) == 78


def test_what_the_stack_needs():
    config = load_files("a4", ROOT)
    assert hub_models(config) == ["google/gemma-4-31B-it"]
    assert needed_quota(config) == {}  # a reservation's capacity was granted when it was made
    dev = needed_quota(load_files("dev", ROOT))
    assert dev == {("TPUS-PER-TPU-FAMILY-per-project-region", (("tpu_family", "CT6E"),)): ("tpu-v6e on-demand", 1)}


# --- each check's logic ----------------------------------------------------------------------


@pytest.mark.parametrize("stdout,status", [("v3.190.0", "ok"), ("v3.187.0\n", "ok"), ("v3.186.2", "MISS"),
                                           ("warning: x", "MISS")])
def test_the_pulumi_version(stdout, status):
    assert checks.pulumi_cli(Ran(0, stdout)).status == status


def test_the_placeholder_project_is_a_miss():
    assert checks.project_id("my-project-id", "my-project-id").status == "MISS"
    assert checks.project_id("ml-team-prod", "my-project-id").status == "ok"


def quota_answer(value: int, region: str = "us-central1", dims: dict | None = None, **eligibility) -> Got:
    return Got(200, google.quota_info("Q", ["region", *(dims or {})], [
        ({"region": region, **(dims or {})}, value, [region])], **eligibility))


FAMILY = {"tpu_family": "CT6E"}
NEED = quotas.Need("tpu-v6e on-demand", "Q", (("tpu_family", "CT6E"),), 16)


class Answers:
    """Answers by URL, for one check at a time; records what was asked with which user project."""

    def __init__(self, by_url: dict[str, Got]):
        self.by_url, self.asked = by_url, []

    def get(self, url: str, token: str = "", user_project: str = "") -> Got:
        self.asked.append((url, user_project))
        return self.by_url.get(url, Got(0, None, "no answer"))


def quota_check(answer: Got, need: quotas.Need = NEED, preferences: Got | None = None) -> checks.Finding:
    answers = Answers({quotas.info_url("p", need.quota_id): answer,
                       **({quotas.pending_url("p"): preferences} if preferences else {})})
    [found] = quotas.quota_findings(answers, "p", "us-central1", [need], "token")
    assert {project for _, project in answers.asked} == {"p"}, "every Cloud Quotas call names the user project"
    return found


@pytest.mark.parametrize("answer,needed,status", [
    (quota_answer(16, dims=FAMILY), 16, "ok"),
    (quota_answer(15, dims=FAMILY), 16, "MISS"),
    (quota_answer(-1, dims=FAMILY), 512, "ok"),  # unlimited
    (quota_answer(64, region="europe-west4", dims=FAMILY), 8, "MISS"),  # another region's
    (quota_answer(64, dims={"tpu_family": "CT5LP"}), 8, "MISS"),  # another family's
    (Got(*google.google_error("NOT_FOUND", "no such quota id")), 8, "warn"),
    (Got(*google.google_error("PERMISSION_DENIED", "denied", "IAM_PERMISSION_DENIED")), 8, "MISS"),
])  # fmt: skip
def test_the_quota_for_the_region_and_the_family(answer, needed, status):
    assert quota_check(answer, quotas.Need("tpu-v6e on-demand", "Q", (("tpu_family", "CT6E"),), needed)).status == status


def test_a_default_entry_applies_to_the_values_no_other_entry_names():
    """Google orders dimensionsInfos from the most specific; one without `tpu_family` is every other family's."""
    answer = Got(200, google.quota_info("Q", ["region", "tpu_family"], [
        ({"region": "us-central1", "tpu_family": "CT5LP"}, 0, ["us-central1"]),
        ({"region": "us-central1"}, 32, ["us-central1"])]))
    assert quota_check(answer).detail == "Q: 32 in us-central1 for 16"


def test_when_the_cloud_quotas_api_is_off_the_fix_is_to_enable_it_not_to_ask_for_quota(root):
    off = google.service_disabled("cloudquotas.googleapis.com", "Cloud Quotas API")
    found = findings(root, "ready", **{quotas.info_url(google.PROJECT, q): off for q in (ON_DEMAND, PREEMPTIBLE)})
    assert "quota tpu-v6e on-demand" not in found, "one finding for the API, not one per quota"
    assert found["quota"].status == "MISS" and "SERVICE_DISABLED" in found["quota"].detail
    assert found["quota"].fix.startswith("`gcloud services enable cloudquotas.googleapis.com --project=ml-team-prod`")
    assert "quotas preferences" not in found["quota"].fix


def test_a_403_that_is_not_the_api_being_off_names_the_permission():
    denied = quota_check(Got(*google.google_error("PERMISSION_DENIED", "Permission denied", "IAM_PERMISSION_DENIED")))
    assert denied.status == "MISS" and "roles/cloudquotas.viewer" in denied.fix
    user_project = quota_check(Got(*google.google_error("PERMISSION_DENIED", "Caller does not have required "
                                                        "permission to use project p", "USER_PROJECT_DENIED")))
    assert "roles/serviceusage.serviceUsageConsumer on p" in user_project.fix


def test_a_quota_google_takes_no_request_for_says_why():
    found = quota_check(quota_answer(0, dims=FAMILY, eligible=False, reason="NO_VALID_BILLING_ACCOUNT"))
    assert "NO_VALID_BILLING_ACCOUNT" in found.detail and found.fix == "link a billing account to the project"


def test_a_pending_request_for_less_than_needed_is_not_enough():
    asked_less = Got(200, google.quota_preferences(("Q", {"region": "us-central1", **FAMILY}, 8)))
    found = quota_check(quota_answer(0, dims=FAMILY), preferences=asked_less)
    assert "pending" not in found.detail and "--preferred-value=16" in found.fix


def test_the_quota_answers_parse_strictly_as_googles_messages():
    """The bodies the tests use are instances of the API's messages: a strict parse accepts them, and
    refuses a body with a field Google doesn't define."""
    from google.cloud.cloudquotas_v1 import types as cq
    import json as json_

    body = google.quota_info("Q", ["region"], [({"region": "us-central1"}, 16, ["us-central1"])])
    cq.QuotaInfo.from_json(json_.dumps(body), ignore_unknown_fields=False)
    body["dimensionsInfos"][0]["detail"] = {"value": "16"}  # misspelt
    with pytest.raises(Exception, match="detail"):
        cq.QuotaInfo.from_json(json_.dumps(body), ignore_unknown_fields=False)


def reservation_answer(count="2", used="0", machine="a4-highgpu-8g", state="READY") -> Got:
    return Got(200, {"status": state, "specificReservation": {"count": count, "inUseCount": used,
                                                              "instanceProperties": {"machineType": machine}}})


@pytest.mark.parametrize("answer,status,words", [
    (reservation_answer(), "ok", "2 of 2 a4-highgpu-8g free"),
    (reservation_answer(used="2"), "MISS", "0 of 2 free in us-central1-b; pool a4 needs 1"),
    (reservation_answer(machine="a3-ultragpu-8g"), "MISS", "the reservation holds a3-ultragpu-8g"),
    (reservation_answer(state="CREATING"), "MISS", "status CREATING"),
    (Got(404, {"error": {"message": "not found"}}), "MISS", "no reservation 'r' in us-central1-b"),
])  # fmt: skip
def test_the_reservation_exists_in_the_zone_with_free_vms_of_the_pools_machine(answer, status, words):
    found = checks.reservation("a4", "r", "us-central1-b", "a4-highgpu-8g", 1, answer)
    assert found.status == status and words in found.detail


def test_the_hub_token():
    assert checks.hf_token("m", Got(401, {"error": "Invalid"}), None, "HF_TOKEN").status == "MISS"
    assert checks.hf_token("m", None, None, "HF_TOKEN unset").detail == "no token (HF_TOKEN unset)"
    assert checks.hf_token("", Got(200, {"name": "ana"}), None, "x").status == "ok"  # a gated dataset's token
    assert checks.hf_token("m", Got(200, {"name": "ana"}), Got(401, "restricted"), "x").status == "MISS"


def test_cloud_build_needs_no_docker():
    found = checks.image_builder("cloudbuild", ["gemma-jax"], Ran(127), Ran(127), {"cloudbuild.googleapis.com"})
    assert found.status == "ok" and "Cloud Build (enabled)" in found.detail
    assert checks.image_builder("docker", [], Ran(127), Ran(127), None).status == "skip"


def test_an_existing_cluster_stack_checks_no_quota_and_no_api(root):
    found = {f.check: f for f in all_findings(Recorded(scenario("ready", root)), load_files("existing-dev", ROOT))}
    assert found["quota"].status == "skip" and found["project APIs"].status in ("skip", "MISS")


# --- it only reads ---------------------------------------------------------------------------


def test_a_recording_never_holds_a_token(tmp_path, monkeypatch):
    live = Live()
    live.run([sys.executable, "-c", "print('ya29.the-access-token')"])
    live.hide("ya29.the-access-token")

    def fake_get(url, headers=None, timeout=None):
        class Resp:
            status_code = 200
            text = "{}"

            def json(self):
                return {"seen": headers}
        return Resp()

    import requests

    monkeypatch.setattr(requests, "get", fake_get)
    monkeypatch.setattr(requests, "post", lambda *a, **k: pytest.fail("the doctor must not POST"))
    live.get("https://huggingface.co/api/whoami-v2", token="hf_secretvalue123")
    live.record(tmp_path / "answers.json")
    text = (tmp_path / "answers.json").read_text()
    assert "ya29.the-access-token" not in text and "hf_secretvalue123" not in text and "[redacted]" in text


def test_the_report_lists_each_check_and_the_fix_only_for_what_is_not_ok():
    lines = report("s", [checks.Finding("a", "ok", "fine", "never shown"), checks.Finding("bb", "MISS", "x", "do y")])
    assert lines[1:] == ["  ok    a   fine", "  MISS  bb  x", "            fix: do y", "1 of 2 checks need you"]


def test_make_doctor_runs_the_tool(root):
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "doctor", "STACK=doctor",
                           f"DOCTOR_ARGS=--root {root} --answers {scenario('ready', root)}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "all 13 checks pass or do not apply"


def test_live_names_the_user_project_and_posts_only_to_methods_that_read(monkeypatch):
    import requests

    sent = []

    class Resp:
        status_code = 200
        text = "{}"

        def json(self):
            return {}

    monkeypatch.setattr(requests, "get", lambda url, headers=None, timeout=None: sent.append(headers) or Resp())
    monkeypatch.setattr(requests, "post", lambda url, json=None, headers=None, timeout=None: sent.append(headers) or Resp())
    live = Live()
    live.get(quotas.info_url("p", "Q"), token="t", user_project="p")
    assert sent[-1] == {"Authorization": "Bearer t", "x-goog-user-project": "p"}
    live.post("https://cloudresourcemanager.googleapis.com/v1/projects/p:testIamPermissions", {"permissions": []}, "t")
    with pytest.raises(ValueError, match="only reads"):
        live.post("https://cloudresourcemanager.googleapis.com/v1/projects/p:setIamPolicy", {}, "t")
    assert len(sent) == 2


def test_the_deploy_permissions_name_each_missing_role_once_and_the_api_when_it_is_off():
    needs = {"compute.firewalls.create": "roles/compute.securityAdmin", "compute.networks.create":
             "roles/compute.networkAdmin", "container.clusters.create": "roles/container.admin"}
    held = Got(200, google.response(deploy.API, deploy.METHOD, {"permissions": ["container.clusters.create"]}))
    found = deploy.finding("p", needs, held, "user:ana@example.com")
    assert found.status == "MISS" and found.detail == ("2 of 3 missing on p: roles/compute.networkAdmin "
                                                       "(compute.networks.create); roles/compute.securityAdmin "
                                                       "(compute.firewalls.create)")
    everything = Got(200, google.response(deploy.API, deploy.METHOD, {"permissions": sorted(needs)}))
    assert deploy.finding("p", needs, everything, "").status == "ok"
    off = Got(*google.service_disabled("cloudresourcemanager.googleapis.com", "Cloud Resource Manager API"))
    found = deploy.finding("p", needs, off, "")
    assert "SERVICE_DISABLED" in found.detail and "gcloud services enable cloudresourcemanager.googleapis.com" in found.fix
    assert deploy.url("p") == "https://cloudresourcemanager.googleapis.com/v1/projects/p:testIamPermissions"


@pytest.mark.parametrize("answer, status, words", [
    (google.google_error("NOT_FOUND", "Secret [hf-token] not found"), "MISS", "no secret projects/ml-team-prod/"),
    (google.service_disabled("secretmanager.googleapis.com", "Secret Manager API"), "MISS", "SERVICE_DISABLED"),
    (google.google_error("PERMISSION_DENIED", "Permission denied", "IAM_PERMISSION_DENIED"), "warn",
     "the runs read it with their own identity"),
])  # fmt: skip
def test_the_token_secret_answers_say_what_to_do(root, answer, status, words):
    found = findings(root, "ready", **{token_secret.access_url(TOKEN_VERSION): answer})
    [token] = [f for c, f in found.items() if c.startswith("Hugging Face")]
    assert token.status == status and words in token.detail, token
    if status == "MISS":
        assert "gcloud secrets create hf-token --project=ml-team-prod --data-file=-" in token.fix


def test_a_recording_never_holds_the_token_nor_its_base64(tmp_path, monkeypatch):
    import requests

    token = "hf_" + "s" * 34
    encoded = base64.b64encode(token.encode()).decode()

    class Resp:
        status_code = 200
        text = ""

        def __init__(self, body):
            self.body = body

        def json(self):
            return self.body

    monkeypatch.setattr(requests, "get", lambda url, headers=None, timeout=None: Resp(
        {"payload": {"data": encoded}} if ":access" in url else {"name": "ana"}))
    live = Live()
    got = live.get(token_secret.access_url(TOKEN_VERSION), "ya29.t")
    token_secret.hide_payload(live, got)
    found, problem = token_secret.token_from(got, TOKEN_VERSION, "Hugging Face token")
    assert (found, problem) == (token, None)
    live.hide(found)
    live.get("https://huggingface.co/api/whoami-v2", found)
    live.record(tmp_path / "answers.json")
    text = (tmp_path / "answers.json").read_text()
    assert token not in text and encoded not in text and "ya29.t" not in text
