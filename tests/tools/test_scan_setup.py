"""`make scan`: the skip list, the Jobs checkov scans, and the wiring into `make test`.

checkov itself runs in .venv-scan (`make scan`); these tests need none of it.
"""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
import yaml

from tests.manifests.test_manifests import CASES
from tools import scan
from manifests.jobset import child_jobs
from tests.support import schemas
from tools import render

ROOT = render.ROOT


def recipe(target: str) -> str:
    """The prerequisites line and recipe of a Makefile target."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{re.escape(target)}:.*\n(?:\t.*\n|  .*\n)*", text, re.MULTILINE)
    assert match, f"no `{target}:` target in the Makefile"
    return match.group(0)


def test_every_skip_names_a_checkov_kubernetes_check_and_says_why():
    skips = scan.load_skips()
    assert skips
    for check, reason in skips.items():
        assert re.fullmatch(r"CKV2?_K8S_[1-9][0-9]*", check), check
        assert reason and "\n" not in reason and len(reason.split()) >= 5, check


def write_skips(tmp_path, entries) -> object:
    path = tmp_path / "skips.yaml"
    path.write_text(yaml.safe_dump({"skips": entries}))
    return path


@pytest.mark.parametrize(
    "entries,problem",
    [
        ([{"id": "CKV_K8S_10"}], "exactly `id` and `reason`"),
        ([{"id": "CKV_K8S_10", "reason": "  "}], "one-line reason"),
        ([{"id": "CKV_K8S_10", "reason": "first line\nsecond line"}], "one-line reason"),
        ([{"id": "CKV_AWS_20", "reason": "not a Kubernetes check"}], "not a checkov Kubernetes check id"),
        ([{"id": "K8S_10", "reason": "no prefix"}], "not a checkov Kubernetes check id"),
        ([{"id": "CKV_K8S_10", "reason": "once"}, {"id": "CKV_K8S_10", "reason": "twice"}], "listed twice"),
        ([], "non-empty `skips:` list"),
    ],
)
def test_a_malformed_skip_list_is_refused(tmp_path, entries, problem):
    with pytest.raises(scan.SkipListError, match=re.escape(problem)):
        scan.load_skips(write_skips(tmp_path, entries))


def test_the_skip_ids_go_to_checkov_comma_separated(capsys):
    assert scan.main(["skips"]) == 0
    assert capsys.readouterr().out.strip().split(",") == list(scan.load_skips())


def test_a_scan_that_checked_nothing_fails(tmp_path, capsys):
    """What checkov reports for files of kinds it does not know, JobSet among them."""
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"passed": 0, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 0}))
    assert scan.main(["summary", str(empty)]) == 1
    assert "ran no check" in capsys.readouterr().err

    ran = tmp_path / "ran.json"
    summary = {"passed": 385, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 15}
    ran.write_text(json.dumps({"check_type": "kubernetes", "results": {"failed_checks": []}, "summary": summary}))
    assert scan.main(["summary", str(ran)]) == 0
    assert "385 checks passed, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_each_replicated_job_is_scanned_as_the_valid_job_it_stands_for(stack, run, contract, manifest):
    jobs = child_jobs(manifest)
    replicated = manifest["spec"]["replicatedJobs"]
    assert list(jobs) == [f"{run.name}-{r['name']}" for r in replicated]
    for job, r in zip(jobs.values(), replicated):
        assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
        assert job["spec"] == r["template"]["spec"]  # the pod template as built, untouched
        assert job["metadata"]["namespace"] == manifest["metadata"]["namespace"]
        kubernetes_validate.validate(job, schemas.KUBERNETES_VERSION, strict=True)


def test_explode_jobs_writes_jobs_instead_of_jobsets(tmp_path):
    assert render.main(["--stack", "a4", "--explode-jobs", "--out", str(tmp_path)]) == 0
    kinds = {p.stem: yaml.safe_load(p.read_text())["kind"] for p in tmp_path.glob("*.yaml")}
    # Each run's child Job, and each dataset's staging Job.
    assert kinds == {**{f"{name}-trainer": "Job" for name in render.stack_manifests("a4")},
                     **{name: "Job" for name in render.staging_manifests("a4")}}
    assert "stage-text-to-sql" in kinds


def test_kueue_writes_a_stacks_kueue_objects_and_nothing_for_a_stack_without(tmp_path):
    assert render.main(["--stack", "tpu-queued", "--kueue", "--out", str(tmp_path / "q")]) == 0
    kinds = {yaml.safe_load(p.read_text())["kind"] for p in (tmp_path / "q").glob("*.yaml")}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck"} <= kinds
    assert render.main(["--stack", "dev", "--kueue", "--out", str(tmp_path / "d")]) == 0
    assert list((tmp_path / "d").glob("*.yaml")) == []
    assert "--kueue" in recipe("scan")


def test_make_test_runs_the_scan_on_every_stack_with_its_skip_list():
    assert "scan" in recipe("test").splitlines()[0].split(":", 1)[1].split()
    body = recipe("scan")
    assert "--framework kubernetes" in body and "--compact" in body
    assert "--explode-jobs" in body and "for stack in $(SCAN_STACKS)" in body
    assert "tools.scan skips" in body and "--skip-check" in body
    assert "tools.scan summary" in body


def test_checkov_is_pinned_in_its_own_environment():
    lines = [line for line in (ROOT / "requirements-scan.txt").read_text().splitlines() if line and line[0] != "#"]
    assert "checkov==3.3.30" in lines
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", line) for line in lines), lines
    assert ".venv-scan" in (ROOT / ".gitignore").read_text().splitlines()
