"""A Cloud Storage emulator on 127.0.0.1 (fake-gcs-server, e2e/tools/fake-gcs), for what reads the bucket.

The Cloud Storage client libraries talk to it when `STORAGE_EMULATOR_HOST`
names it (google-cloud-storage: `_get_storage_emulator_override`, no
credentials asked for), so `make status` reads progress records from it as
it reads them from the stack's bucket. The harness uploads with the emulator's
JSON API, in memory only.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass

from e2e.harness.cluster import LOCALHOST, free_port
from e2e.harness.kube import wait_for
from e2e.harness.processes import Supervisor
from e2e.harness.tools import Tools

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class FakeGcs:
    url: str  # http://127.0.0.1:<port>

    @property
    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.url}

    def _call(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"):
        req = urllib.request.Request(self.url + path, data=body, method=method, headers={"Content-Type": content_type})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else {}

    def create_bucket(self, name: str) -> None:
        self._call("POST", "/storage/v1/b?project=e2e", json.dumps({"name": name}).encode())

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        self._call("POST", f"/upload/storage/v1/b/{bucket}/o?{query}", data, "application/octet-stream")

    def names(self, bucket: str) -> list[str]:
        return [o["name"] for o in self._call("GET", f"/storage/v1/b/{bucket}/o").get("items", [])]


def start(supervisor: Supervisor, tools: Tools, location: str | None = None) -> FakeGcs:
    """`location`: the location buckets.get reports for every bucket (the server's `-location`)."""
    port = free_port()
    supervisor.start("fake-gcs-server", [
        str(tools.bin("fake-gcs-server")), "-scheme", "http", "-host", LOCALHOST, "-port", str(port),
        "-backend", "memory", "-public-host", f"{LOCALHOST}:{port}", "-log-level", "warn",
        *(("-location", location) if location else ()),
    ])
    gcs = FakeGcs(f"http://{LOCALHOST}:{port}")

    def up() -> bool:
        try:
            gcs._call("GET", "/storage/v1/b?project=e2e")
            return True
        except OSError:
            return False

    wait_for("fake-gcs-server", up, START_TIMEOUT, explain=lambda: supervisor.log_tail("fake-gcs-server"))
    return gcs
