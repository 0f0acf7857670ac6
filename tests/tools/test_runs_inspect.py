"""`make inspect`: one folder with the run's objects, events, nodes, logs, progress record and declared
manifest, and no secret in any of it."""

from __future__ import annotations

import json

import yaml

from tests.support.run_objects import NS, jobset, pod
from tools.runs.inspect import gather, run_events
from tools.runs.redact import REDACTED, redact, redact_text

RUN = "gemma3-single-host"
TOKEN = "hf_" + "A1b2C3d4" * 5
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----"


def test_text_secrets_are_taken_out_and_training_lines_kept():
    text = (f"login with {TOKEN}\nAuthorization: Bearer ya29.a0AfH6SMB\n{KEY}\n"
            f'{{"private_key": "abc", "client_email": "x@y"}}\nHF_TOKEN=secret123 step 40 loss 2.5 tokens/s: 5120\n')
    out = redact_text(text)
    for secret in (TOKEN, "ya29.a0AfH6SMB", "MIIEvQ", '"abc"', "secret123"):
        assert secret not in out
    assert "step 40 loss 2.5 tokens/s: 5120" in out and '"client_email": "x@y"' in out


def test_objects_lose_secret_values_last_applied_and_managed_fields():
    secret = {"kind": "Secret", "metadata": {"name": "hf-token"}, "data": {"token": "aGZf"}}
    container = {"name": "trainer", "env": [{"name": "HF_TOKEN", "value": TOKEN}, {"name": "STEPS", "value": "40"},
                                            {"name": "HF_HOME", "valueFrom": {"secretKeyRef": {"name": "hf-token"}}}]}
    obj = {"kind": "Pod", "metadata": {"name": "p", "managedFields": [{"manager": "x"}], "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}}, "spec": {"containers": [container]}}
    assert redact(secret)["data"] == {"token": REDACTED}
    out = redact(obj)
    assert "managedFields" not in out["metadata"] and out["metadata"]["annotations"] == {"keep": "me"}
    env = out["spec"]["containers"][0]["env"]
    assert env[0]["value"] == REDACTED and env[1]["value"] == "40" and env[2]["valueFrom"]


class Cluster:
    def __init__(self, pods):
        self._pods = pods

    def jobset(self, run):
        return jobset(run, "Failed")

    def jobs(self, run):
        return [{"metadata": {"name": f"{run}-trainer-0", "namespace": NS}, "status": {"failed": 1}}]

    def pods(self, run):
        return self._pods

    def snapshot(self):
        return {"workloads": [], "requests": []}

    def events(self):
        return [{"involvedObject": {"kind": "Pod", "name": self._pods[0]["metadata"]["name"]}, "reason": "Killing",
                 "message": f"token {TOKEN}", "lastTimestamp": "2026-12-04T10:02:00Z"},
                {"involvedObject": {"kind": "JobSet", "name": RUN}, "reason": "Failed", "message": "x",
                 "lastTimestamp": "2026-12-04T10:01:00Z"},
                {"involvedObject": {"kind": "Pod", "name": "someone-else"}, "reason": "Pulled", "message": "y"}]

    def full_nodes(self, names):
        return [{"metadata": {"name": n, "labels": {"a": "b"}}, "spec": {"taints": [{"key": "google.com/tpu"}]},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "43"}}}
                for n in sorted(names)]

    def log(self, pod_name, container, tail=None):
        return f"step 1\nconfiguration error: --batch_size=0 bad\nusing {TOKEN}\n"


def test_the_folder_holds_everything_listed_and_no_secret(tmp_path):
    failed = pod(RUN, 0, state="terminated", code=78)
    folder = gather(Cluster([failed]), "dev", RUN, tmp_path / "out", ["run gemma3-single-host: failed"],
                    {"logs": "https://console.cloud.google.com/logs/query;query=x"},
                    ({"schema": 1, "step": 40}, ""), {"kind": "JobSet", "metadata": {"name": RUN}})
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert names == {"README.txt", "jobset.yaml", "jobs.yaml", "pods.yaml", "events.yaml", "nodes.yaml",
                     "declared.yaml", "progress.json", f"logs/{failed['metadata']['name']}.trainer.log"}
    assert all(TOKEN not in (folder / n).read_text() for n in names)
    assert yaml.safe_load((folder / "jobset.yaml").read_text())["status"]["conditions"][0]["type"] == "Failed"
    assert yaml.safe_load((folder / "pods.yaml").read_text())[0]["kind"] == "Pod"
    assert [e["reason"] for e in yaml.safe_load((folder / "events.yaml").read_text())] == ["Failed", "Killing"]
    [node] = yaml.safe_load((folder / "nodes.yaml").read_text())
    assert node["name"] == "node-0" and node["conditions"][0]["type"] == "Ready" and node["taints"]
    assert json.loads((folder / "progress.json").read_text())["step"] == 40
    assert "configuration error: --batch_size=0 bad" in (folder / f"logs/{failed['metadata']['name']}.trainer.log").read_text()
    readme = (folder / "README.txt").read_text()
    assert "run gemma3-single-host: failed" in readme and "logs     https://console.cloud.google.com" in readme


def test_no_record_and_no_declared_manifest_say_so(tmp_path):
    folder = gather(Cluster([pod(RUN, 0)]), "dev", RUN, tmp_path / "o", [], {}, (None, "gs://b/x: 403 Forbidden"), None)
    assert (folder / "progress.txt").read_text() == "gs://b/x: 403 Forbidden\n"
    assert not (folder / "declared.yaml").exists()


def test_events_are_the_runs_objects_only_oldest_first():
    events = Cluster([pod(RUN, 0)]).events()
    assert [e["reason"] for e in run_events(events, {("JobSet", RUN)})] == ["Failed"]
