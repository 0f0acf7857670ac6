"""`make doctor`: each check's logic against recorded answers of the programs and APIs (tests/tools/doctor/),
the report for a stack with every check failing and with every check passing, and that it only reads."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stack.reader import load_files
from tests.support.pulumi_harness import ROOT
from tools.doctor import checks
from tools.doctor.__main__ import main, report
from tools.doctor.answers import Got, Live, Ran, Recorded
from tools.doctor.stack_checks import all_findings, hub_models, needed_quota

HERE = Path(__file__).parent / "doctor"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path)
    shutil.copy(HERE / "Pulumi.doctor.yaml", tmp_path)
    return tmp_path


def statuses(root: Path, answers: str) -> dict[str, str]:
    found = all_findings(Recorded(HERE / f"{answers}.json"), load_files("doctor", root))
    return {f.check: f.status for f in found}


def test_every_check_passes_on_a_ready_machine_and_project(root):
    found = statuses(root, "ready")
    assert set(found.values()) == {"ok"}, found
    assert set(found) == {"project", "Pulumi CLI", "gcloud credentials", "Application Default Credentials",
                          "gke-gcloud-auth-plugin", "image builder", "project APIs", "quota tpu-v6e preemptible",
                          "quota tpu-v6e on-demand", "reservation a4-reservation", "bucket",
                          "Hugging Face google/gemma-4-31B-it"}


def test_every_project_check_fails_on_a_project_not_ready(root):
    found = statuses(root, "project-not-ready")
    assert {c for c, s in found.items() if s == "MISS"} == {
        "project APIs", "quota tpu-v6e preemptible", "quota tpu-v6e on-demand", "reservation a4-reservation",
        "bucket", "Hugging Face google/gemma-4-31B-it"}


def test_every_machine_check_fails_on_a_machine_with_nothing_set_up(root):
    found = statuses(root, "nothing-set-up")
    assert {c for c, s in found.items() if s == "MISS"} == {
        "Pulumi CLI", "gcloud credentials", "Application Default Credentials", "gke-gcloud-auth-plugin",
        "image builder", "Hugging Face google/gemma-4-31B-it"}
    assert {c for c, s in found.items() if s == "skip"} == {"project APIs", "quota", "reservation a4-reservation",
                                                            "bucket"}


def test_the_report_says_each_fix_and_the_exit_code_says_whether_to_fix(root, capsys):
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(HERE / "ready.json")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "all 12 checks pass or do not apply"
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(HERE / "project-not-ready.json")]) == 1
    out = capsys.readouterr().out
    assert "fix: request 8 in us-central1: Console, IAM & Admin > Quotas, filter `PREEMPTIBLE-TPU-V6E" in out
    assert "fix: accept its licence at https://huggingface.co/google/gemma-4-31B-it" in out
    assert "fix: a name of the stack's own: `gke-finetune:bucketName` in the stack file" in out
    assert out.splitlines()[-1] == "6 of 12 checks need you"


def test_an_invalid_stack_exits_78(root, capsys):
    (root / "Pulumi.doctor.yaml").write_text("config:\n  gcp:project: x\n")
    assert main(["--stack", "doctor", "--root", str(root), "--answers", str(HERE / "ready.json")]) == 78


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


def quota_answer(value: str, region: str = "us-central1", dims: dict | None = None) -> Got:
    return Got(200, {"quotaId": "Q", "dimensionsInfos": [
        {"dimensions": {"region": region, **(dims or {})}, "details": {"value": value}, "applicableLocations": [region]}]})


FAMILY = {"tpu_family": "CT6E"}


@pytest.mark.parametrize("answer,needed,status", [
    (quota_answer("16", dims=FAMILY), 16, "ok"),
    (quota_answer("15", dims=FAMILY), 16, "MISS"),
    (quota_answer("-1", dims=FAMILY), 512, "ok"),  # unlimited
    (quota_answer("64", region="europe-west4", dims=FAMILY), 8, "MISS"),  # another region's
    (quota_answer("64", dims={"tpu_family": "CT5LP"}), 8, "MISS"),  # another family's
    (Got(404, {"error": {"message": "no such quota id"}}), 8, "warn"),
    (Got(403, {"error": {"message": "denied"}}), 8, "MISS"),
])  # fmt: skip
def test_the_quota_for_the_region_and_the_family(answer, needed, status):
    assert checks.quota("tpu-v6e on-demand", needed, "us-central1", answer, "Q", FAMILY).status == status


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
    assert checks.hf_token("m", None, None, "the stack's hfToken").detail == "no token (the stack's hfToken)"
    assert checks.hf_token("", Got(200, {"name": "ana"}), None, "x").status == "ok"  # a gated dataset's token
    assert checks.hf_token("m", Got(200, {"name": "ana"}), Got(401, "restricted"), "x").status == "MISS"


def test_cloud_build_needs_no_docker():
    found = checks.image_builder("cloudbuild", ["gemma-jax"], Ran(127), Ran(127), {"cloudbuild.googleapis.com"})
    assert found.status == "ok" and "Cloud Build (enabled)" in found.detail
    assert checks.image_builder("docker", [], Ran(127), Ran(127), None).status == "skip"


def test_an_existing_cluster_stack_checks_no_quota_and_no_api(root):
    found = {f.check: f for f in all_findings(Recorded(HERE / "ready.json"), load_files("existing-dev", ROOT))}
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
                           f"DOCTOR_ARGS=--root {root} --answers {HERE / 'ready.json'}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "all 12 checks pass or do not apply"
