"""The staging code against a local HTTP server on 127.0.0.1: a file URL and a Hub dataset, copied once, safely."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

from trainers.exit_codes import CONFIG_ERROR
from trainers.staging import stage as staging
from trainers.staging.sources import SourceError
from trainers.staging.transfer import TransferError

STORIES = "".join(f"Once upon a time there was story {i}.<|endoftext|>\n" for i in range(2000)).encode()
SHA = hashlib.sha256(STORIES).hexdigest()


class Server:
    """A few routes on 127.0.0.1, each GET counted; started and stopped by the test."""

    def __init__(self, routes: dict[str, tuple[int, bytes, dict]]):
        self.routes, self.hits = routes, {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path.split("?")[0]
                server.hits[path] = server.hits.get(path, 0) + 1
                status, body, headers = server.routes.get(path, (404, b"not found", {}))
                self.send_response(status)
                self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server({"/TinyStories-train.txt": (200, STORIES, {}),
                "/truncated.txt": (200, STORIES[:1000], {"Content-Length": str(len(STORIES))})})
    yield s
    s.close()


def url_spec(server, path="/TinyStories-train.txt", **extra):
    return {"kind": "url", "url": server.url + path, **extra}


def test_a_file_url_is_staged_with_its_checksum(server, tmp_path):
    manifest = staging.stage(url_spec(server), tmp_path)
    assert (tmp_path / "TinyStories-train.txt").read_bytes() == STORIES
    assert manifest["files"] == [{"name": "TinyStories-train.txt", "size": len(STORIES), "sha256": SHA}]
    assert json.loads((tmp_path / ".staged.json").read_text()) == manifest


def test_a_second_run_copies_nothing(server, tmp_path, capsys):
    staging.stage(url_spec(server), tmp_path)
    before = (tmp_path / "TinyStories-train.txt").stat().st_mtime_ns
    staging.stage(url_spec(server), tmp_path)
    assert server.hits["/TinyStories-train.txt"] == 1
    assert (tmp_path / "TinyStories-train.txt").stat().st_mtime_ns == before
    assert "0 file(s) copied, 1 already there" in capsys.readouterr().err


def test_progress_is_logged_with_size_and_rate(server, tmp_path, capsys):
    staging.stage(url_spec(server), tmp_path)
    err = capsys.readouterr().err
    assert f"of {len(STORIES) / 1e6:.1f} MB at" in err and "MB/s" in err


def test_a_truncated_download_leaves_no_object_and_keeps_the_old_one(server, tmp_path):
    (tmp_path / "truncated.txt").write_text("the staged copy")
    with pytest.raises(TransferError, match="got 1000 of"):
        staging.stage(url_spec(server, "/truncated.txt"), tmp_path)
    assert (tmp_path / "truncated.txt").read_text() == "the staged copy"
    assert not list(tmp_path.glob("*.partial")) and not (tmp_path / ".staged.json").exists()


def test_a_checksum_mismatch_fails_without_an_object(server, tmp_path):
    with pytest.raises(SourceError, match="is not the expected"):
        staging.stage(url_spec(server, sha256="0" * 64), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_entry_point_exits_78_on_a_missing_file_naming_the_source(server, tmp_path, capsys):
    spec = json.dumps(url_spec(server, "/nope.txt"))
    assert staging.main(["--source", spec, "--dest", str(tmp_path)]) == CONFIG_ERROR
    err = capsys.readouterr().err
    assert "/nope.txt: HTTP 404" in err


def test_the_entry_point_exits_1_on_a_transfer_a_retry_may_fix(server, tmp_path):
    spec = json.dumps(url_spec(server, "/truncated.txt"))
    assert staging.main(["--source", spec, "--dest", str(tmp_path)]) == 1


def test_a_changed_source_is_staged_anew(server, tmp_path):
    staging.stage(url_spec(server), tmp_path)
    staging.stage(url_spec(server, sha256=SHA), tmp_path)  # another spec: verified and copied again
    assert server.hits["/TinyStories-train.txt"] == 2


@pytest.fixture
def hub(monkeypatch):
    files = {"data/train-00000.parquet": b"train rows", "data/test-00000.parquet": b"test rows",
             "README.md": b"# card", ".gitattributes": b""}
    info = {"sha": "a" * 40, "siblings": [{"rfilename": n} for n in files]}
    routes = {"/api/datasets/org/sql/revision/v1.0": (200, json.dumps(info).encode(), {})}
    routes.update({f"/datasets/org/sql/resolve/{'a' * 40}/{n}": (200, b, {}) for n, b in files.items()})
    s = Server(routes)
    monkeypatch.setenv("HF_ENDPOINT", s.url)
    yield s
    s.close()


def test_a_hub_dataset_is_staged_at_its_revision_s_commit(hub, tmp_path):
    manifest = staging.stage({"kind": "hub", "id": "org/sql", "revision": "v1.0"}, tmp_path)
    assert manifest["resolved"] == "a" * 40
    assert sorted(f["name"] for f in manifest["files"]) == ["data/test-00000.parquet", "data/train-00000.parquet"]
    assert (tmp_path / "data/train-00000.parquet").read_bytes() == b"train rows"
    again = staging.stage({"kind": "hub", "id": "org/sql", "revision": "v1.0"}, tmp_path)
    assert again["files"] == manifest["files"]
    assert hub.hits[f"/datasets/org/sql/resolve/{'a' * 40}/data/train-00000.parquet"] == 1


def test_a_hub_split_filter_and_an_unknown_dataset(hub, tmp_path):
    manifest = staging.stage({"kind": "hub", "id": "org/sql", "revision": "v1.0", "split": "train"}, tmp_path)
    assert [f["name"] for f in manifest["files"]] == ["data/train-00000.parquet"]
    with pytest.raises(SourceError, match="HTTP 404"):
        staging.stage({"kind": "hub", "id": "org/none", "revision": "v1.0"}, tmp_path / "x")


def test_a_mounted_prefix_is_copied(tmp_path):
    source = tmp_path / "source"
    (source / "a").mkdir(parents=True)
    (source / "a" / "b.txt").write_text("b")
    (source / "c.txt").write_text("c")
    manifest = staging.stage({"kind": "mounted", "path": str(source)}, tmp_path / "dest")
    assert sorted(f["name"] for f in manifest["files"]) == ["a/b.txt", "c.txt"]
    assert (tmp_path / "dest" / "a" / "b.txt").read_text() == "b"


def test_the_staging_code_needs_only_the_standard_library():
    import ast

    for path in Path(staging.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] in {"__future__", "trainers", "argparse", "json", "sys", "pathlib",
                                                     "hashlib", "time", "urllib", "dataclasses", "fnmatch", "os"}, path
