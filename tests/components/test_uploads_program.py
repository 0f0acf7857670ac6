"""A dataset from the machine running `pulumi up` (`path:`): what the program declares for it."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from components.uploads import LocalFile, check_upload, local_file
from stack.problems import ConfigError
from tests.support.checkout import linked_checkout
from tests.support.pulumi_harness import declared_before_error, run_stack

OBJECT = "gcp:storage/bucketObject:BucketObject"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
BUCKET = "my-project-id-dev-finetune"


def _deploy(path, data):
    """The dev stack with a dataset of `path`, a file or folder in data/ of a checkout below tmp_path."""
    tree = path.parents[1]
    datasets = [{"name": "tickets", "path": path.relative_to(tree).as_posix()}]
    runs = [{"name": "chat", "trainer": "gemma-jax", "pool": "v6e-1x1", "data": data, "format": "conversational",
             "args": ["--batch_size", "32"]}]
    return run_stack("dev", overrides={"gke-finetune:datasets": datasets, "gke-finetune:runs": runs}, root=tree)


@pytest.fixture
def data(tmp_path):
    """data/ of a checkout of its own, where the program runs (the CLI runs it in the project's directory)."""
    folder = linked_checkout(tmp_path) / "data"
    folder.mkdir()
    return folder


CHAT = b'{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}\n'
OTHER_CHAT = CHAT.replace(b"Hello.", b"Hello!")


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_a_folder_is_uploaded_file_by_file_with_its_checksum_before_the_runs(data):
    folder = data / "tickets"
    (folder / "2026").mkdir(parents=True)
    (folder / "train.jsonl").write_bytes(CHAT)
    (folder / "2026" / "more.jsonl").write_bytes(OTHER_CHAT * 2)
    (folder / ".DS_Store").write_text("not data")  # hidden: left out
    d = _deploy(folder, "tickets")
    objects = {o.inputs["name"]: o for o in d.of_type(OBJECT)}
    assert set(objects) == {"datasets/dev/tickets/train.jsonl", "datasets/dev/tickets/2026/more.jsonl",
                            "datasets/dev/tickets/.staged.json"}
    train = objects["datasets/dev/tickets/train.jsonl"]
    assert train.inputs["bucket"] == BUCKET
    assert train.inputs["sourceMd5hash"] == _md5(CHAT)
    assert train.delete_before_replace  # the same name: the old object goes first
    assert train.retain_on_delete  # `pulumi destroy` leaves the dataset in the bucket
    content = objects["datasets/dev/tickets/.staged.json"].inputs["content"]
    record = json.loads(content["value"] if isinstance(content, dict) else content)  # a secret to the provider
    assert record["source"] == {"kind": "path", "path": "data/tickets"}
    assert [(f["name"], f["size"]) for f in record["files"]] == [("2026/more.jsonl", 2 * len(CHAT)), ("train.jsonl", len(CHAT))]
    assert record["files"][1]["sha256"] == hashlib.sha256(CHAT).hexdigest()
    [run] = d.of_type(JOBSET)
    assert {o.urn for o in objects.values()} <= set(run.dependencies)
    assert not d.of_type(JOB)  # no staging Job: `pulumi up` uploads it
    args = run.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--data_path") + 1] == "/data/tickets"
    assert d.outputs["datasets"] == {"tickets": f"gs://{BUCKET}/datasets/dev/tickets/"}


def test_a_file_is_read_by_its_name_and_only_a_changed_file_changes(data):
    path = data / "chats.jsonl"
    path.write_bytes(CHAT)
    first = {o.inputs["name"]: o.inputs for o in _deploy(path, "tickets").of_type(OBJECT)}
    again = {o.inputs["name"]: o.inputs for o in _deploy(path, "tickets").of_type(OBJECT)}
    assert {k: v["sourceMd5hash"] for k, v in first.items() if "sourceMd5hash" in v} == {
        k: v["sourceMd5hash"] for k, v in again.items() if "sourceMd5hash" in v}  # nothing to upload again
    path.write_bytes(OTHER_CHAT)
    changed = _deploy(path, "tickets")
    [obj] = [o for o in changed.of_type(OBJECT) if o.inputs["name"] == "datasets/dev/tickets/chats.jsonl"]
    assert obj.inputs["sourceMd5hash"] == _md5(OTHER_CHAT) != first["datasets/dev/tickets/chats.jsonl"]["sourceMd5hash"]
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


@pytest.mark.parametrize("path, why", [("no/such/file.jsonl", "does not exist"),
                                       ("data/empty", "is a folder with no file in it")])
def test_a_path_that_does_not_exist_is_refused_before_anything_is_declared(data, path, why):
    (data / "empty").mkdir()
    overrides = {"gke-finetune:datasets": [{"name": "tickets", "path": path}]}
    declared, err = declared_before_error("dev", overrides=overrides, root=data.parent)
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith(f"datasets[0].path: {path!r} {why}; allowed: a file or folder inside the project's "
                            f"directory ({data.parent.resolve()})") for p in err.problems), err.problems


def _refused(data, path: str) -> list[str]:
    overrides = {"gke-finetune:datasets": [{"name": "tickets", "path": path}]}
    declared, err = declared_before_error("dev", overrides=overrides, root=data.parent)
    assert isinstance(err, ConfigError) and declared.resources == [], err
    return [p for p in err.problems if p.startswith("datasets[0].path:")]


def test_a_path_out_of_the_checkout_is_refused_naming_the_key_and_where_it_leads(data, tmp_path):
    outside = tmp_path / "secrets.txt"
    outside.write_text("PULUMI_CONFIG_PASSPHRASE=hunter2\n")
    (data / "env").symlink_to("/proc/self/environ")
    (data / "mine.jsonl").symlink_to(outside)
    (data / "folder").mkdir()
    (data / "folder" / "ok.jsonl").write_text("{}\n")
    (data / "folder" / "leak.jsonl").symlink_to(outside)
    (data / "folder" / "home").symlink_to(tmp_path, target_is_directory=True)
    root = data.parent.resolve()
    for path, why in [("/proc/self/environ", "is absolute"), ("~/.ssh/id_rsa", "is absolute"),
                      ("../secrets.txt", "climbs out of the project's directory with '..'"),
                      ("data/../../secrets.txt", "climbs out"),
                      ("data/env", "resolves to /proc/"), ("data/mine.jsonl", f"resolves to {outside.resolve()}")]:
        [problem] = _refused(data, path)
        assert problem.startswith(f"datasets[0].path: {path!r} {why}"), problem
        assert f"allowed: a file or folder inside the project's directory ({root})" in problem
    found = _refused(data, "data/folder")
    assert any(f"holds leak.jsonl, which resolves to {outside.resolve()}" in p for p in found), found
    assert any(f"holds home, which resolves to {tmp_path.resolve()}" in p for p in found), found


def test_links_that_stay_inside_the_checkout_are_followed_once(data):
    (data / "real").mkdir()
    (data / "real" / "a.jsonl").write_bytes(CHAT)
    (data / "set").mkdir()
    (data / "set" / "a.jsonl").symlink_to(data / "real" / "a.jsonl")
    (data / "set" / "again").symlink_to(data / "set", target_is_directory=True)  # a loop
    objects = {o.inputs["name"] for o in _deploy(data / "set", "tickets").of_type(OBJECT)}
    assert objects == {"datasets/dev/tickets/a.jsonl", "datasets/dev/tickets/.staged.json"}
