"""A dataset from the machine running `pulumi up` (`path:`): what the program declares for it."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from components.uploads import LocalFile, check_upload, local_file
from stack.problems import ConfigError
from tests.support.pulumi_harness import declared_before_error, run_stack

OBJECT = "gcp:storage/bucketObject:BucketObject"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
BUCKET = "my-project-id-dev-finetune"


def _deploy(path, data):
    datasets = [{"name": "tickets", "path": str(path)}]
    runs = [{"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": data, "format": "conversational",
             "args": ["--batch_size", "32"]}]
    return run_stack("dev", overrides={"gke-finetune:datasets": datasets, "gke-finetune:runs": runs})


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_a_folder_is_uploaded_file_by_file_with_its_checksum_before_the_runs(tmp_path):
    folder = tmp_path / "tickets"
    (folder / "2026").mkdir(parents=True)
    (folder / "train.jsonl").write_text('{"messages": []}\n')
    (folder / "2026" / "more.jsonl").write_text('{"messages": [1]}\n')
    (folder / ".DS_Store").write_text("not data")  # hidden: left out
    d = _deploy(folder, "tickets")
    objects = {o.inputs["name"]: o for o in d.of_type(OBJECT)}
    assert set(objects) == {"datasets/dev/tickets/train.jsonl", "datasets/dev/tickets/2026/more.jsonl",
                            "datasets/dev/tickets/.staged.json"}
    train = objects["datasets/dev/tickets/train.jsonl"]
    assert train.inputs["bucket"] == BUCKET
    assert train.inputs["sourceMd5hash"] == _md5(b'{"messages": []}\n')
    assert train.delete_before_replace  # the same name: the old object goes first
    assert train.retain_on_delete  # `pulumi destroy` leaves the dataset in the bucket
    content = objects["datasets/dev/tickets/.staged.json"].inputs["content"]
    record = json.loads(content["value"] if isinstance(content, dict) else content)  # a secret to the provider
    assert record["source"] == {"kind": "path", "path": str(folder)}
    assert [(f["name"], f["size"]) for f in record["files"]] == [("2026/more.jsonl", 18), ("train.jsonl", 17)]
    assert record["files"][1]["sha256"] == hashlib.sha256(b'{"messages": []}\n').hexdigest()
    [run] = d.of_type(JOBSET)
    assert {o.urn for o in objects.values()} <= set(run.dependencies)
    assert not d.of_type(JOB)  # no staging Job: `pulumi up` uploads it
    args = run.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--data_path") + 1] == "/data/tickets"
    assert d.outputs["datasets"] == {"tickets": f"gs://{BUCKET}/datasets/dev/tickets/"}


def test_a_file_is_read_by_its_name_and_only_a_changed_file_changes(tmp_path):
    path = tmp_path / "chats.jsonl"
    path.write_text("a\n")
    first = {o.inputs["name"]: o.inputs for o in _deploy(path, "tickets").of_type(OBJECT)}
    again = {o.inputs["name"]: o.inputs for o in _deploy(path, "tickets").of_type(OBJECT)}
    assert {k: v["sourceMd5hash"] for k, v in first.items() if "sourceMd5hash" in v} == {
        k: v["sourceMd5hash"] for k, v in again.items() if "sourceMd5hash" in v}  # nothing to upload again
    path.write_text("b\n")
    changed = _deploy(path, "tickets")
    [obj] = [o for o in changed.of_type(OBJECT) if o.inputs["name"] == "datasets/dev/tickets/chats.jsonl"]
    assert obj.inputs["sourceMd5hash"] == _md5(b"b\n") != first["datasets/dev/tickets/chats.jsonl"]["sourceMd5hash"]
    [run] = changed.of_type(JOBSET)
    args = run.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--data_path") + 1] == "/data/tickets/chats.jsonl"


def test_an_upload_whose_checksum_differs_fails(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"x")
    found = local_file("f.jsonl", path)
    assert found == LocalFile("f.jsonl", path, 1, _md5(b"x"), hashlib.sha256(b"x").hexdigest())
    assert check_upload(found, found.md5) == found.md5 and check_upload(found, None) is None  # a preview
    with pytest.raises(ValueError, match="f.jsonl.*uploaded as .../f.jsonl with MD5 .*run `pulumi up` again"):
        check_upload(found, _md5(b"y"))


@pytest.mark.parametrize("path, why", [("no/such/file.jsonl", "does not exist"), ("EMPTY", "is a folder with no file in it")])
def test_a_path_that_does_not_exist_is_refused_before_anything_is_declared(tmp_path, path, why):
    if path == "EMPTY":
        path = str(tmp_path / "empty")
        (tmp_path / "empty").mkdir()
    overrides = {"gke-finetune:datasets": [{"name": "tickets", "path": path}]}
    declared, err = declared_before_error("dev", overrides=overrides)
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith(f"datasets[0].path: {path!r} {why}; allowed: a file or folder on this machine")
               for p in err.problems), err.problems
