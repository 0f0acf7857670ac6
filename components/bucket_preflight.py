"""The stack's bucket, read before anything is declared: what admission/shared_bucket.py judges, and the two facts
the program declares differently by: the runs kept on the prefixes they were deployed with, and the folders that
exist already.

GETs of the Cloud Storage JSON API (https://cloud.google.com/storage/docs/json_api/v1), with the Application
Default Credentials the providers use, or of the emulator STORAGE_EMULATOR_HOST names, as google-cloud-storage
does (google/cloud/storage/_helpers.py `_get_storage_emulator_override`):
- buckets.get `b/<bucket>`: an existing bucket's uniform access, public access prevention, location, and
  hierarchical namespace;
- buckets.getIamPolicy `b/<bucket>/iam?optionsRequestedPolicyVersion=3` (conditions need version 3): the runs
  this stack deployed before the prefixes carried the stack, and another principal writing below its prefixes;
- objects.list `b/<bucket>/o?prefix=...&maxResults=1` and objects.get `...?alt=media` of a progress record: which
  of a run's old and new prefixes holds its progress;
- folders.get and folders.list (hierarchical namespace): the stack's folders that exist, which the program
  adopts (`import`) rather than creating them twice (components/storage.py).
They run in `pulumi preview` and `pulumi up` alike; under the SDK's mocks (the offline plan, the tests) nothing is
read. What can't be read is not judged, and a warning says so ("not checked: <why>"), but for one case: a run whose
old prefix holds checkpoints that nothing shows to be this stack's is refused rather than silently restarted.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pulumi

from admission.shared_bucket import (
    bucket_problems, foreign_writers, hierarchical_namespace, keeps_legacy, legacy_grants,
)
from components.preflight import under_mocks
from core.ids import workload_identity_pool
from core.names import CHECKPOINT_PREFIX, PROFILE_PREFIX, legacy_prefix
from core.syntax import ZONE
from stack.config import StackConfig
from stack.problems import ConfigError, Problem

API = "https://storage.googleapis.com/storage/v1"
EMULATOR = "STORAGE_EMULATOR_HOST"
TIMEOUT_S = (5, 15)  # connect, read: a preview should not hang on an unreachable API
PROGRESS = "progress.json"  # trainers/*/progress.py FILE
READ_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"

Get = Callable[[str], tuple[int, Any]]  # path and query below the API's root -> (HTTP status, JSON or text)


def live_get() -> Get:
    """GETs with the stack's credentials (or the emulator's, which asks for none). Status 0: no answer."""
    import requests  # pylint: disable=import-outside-toplevel

    emulator = os.environ.get(EMULATOR)
    if emulator:
        session, base = requests.Session(), f"{emulator.rstrip('/')}/storage/v1"
    else:
        import google.auth  # pylint: disable=import-outside-toplevel
        from google.auth.transport.requests import AuthorizedSession  # pylint: disable=import-outside-toplevel

        credentials, _ = google.auth.default(scopes=[READ_SCOPE])
        session, base = AuthorizedSession(credentials), API

    from google.auth.exceptions import GoogleAuthError  # pylint: disable=import-outside-toplevel

    def get(path: str) -> tuple[int, Any]:
        try:
            resp = session.get(f"{base}/{path}", timeout=TIMEOUT_S)
        except (requests.RequestException, GoogleAuthError) as err:  # no route, or credentials that can't refresh
            return 0, f"{type(err).__name__}: {str(err)[:160]}"
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text
    return get


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


@dataclass
class BucketFacts:
    """What the bucket showed: `bucket` (buckets.get; None: not read or not there), the runs kept on their old
    prefixes, the folders that exist, and what could not be read."""

    bucket: dict | None = None
    legacy_runs: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def hierarchical(self) -> bool | None:
        return None if self.bucket is None else hierarchical_namespace(self.bucket)


def _why(status: int, body: Any) -> str:
    message = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else str(body)[:200]
    return f"HTTP {status}: {message}" if status else f"no answer: {message}"


class BucketReader:
    """The reads of one stack's bucket, through `get`."""

    def __init__(self, cfg: StackConfig, get: Get):
        self.cfg, self.get, self.name = cfg, get, cfg.data_bucket
        self.facts = BucketFacts()

    def not_checked(self, what: str, status: int, body: Any) -> None:
        self.facts.warnings.append(f"gs://{self.name}: {what} not checked: {_why(status, body)}")

    def read(self) -> BucketFacts:
        status, body = self.get(f"b/{_quote(self.name)}")
        if status == 404:
            if self.cfg.existing is not None:
                self.facts.problems.append(Problem("bucketName", self.name, "does not exist (buckets.get: 404)",
                                                   "the name of the bucket the platform team made for the stack"))
            return self.facts  # the stack's own bucket, still to be created: nothing in it yet
        if status != 200 or not isinstance(body, dict):
            self.not_checked("its settings, the runs' prefixes and folders", status, body)
            return self.facts
        self.facts.bucket = body
        if self.cfg.existing is not None:
            self._settings(body)
        policy = self._policy()
        self.facts.legacy_runs = frozenset(self._legacy_runs(policy))
        if hierarchical_namespace(body):
            self.facts.folders = frozenset(self._folders())
            if self.cfg.existing is not None and not self.cfg.existing.bucket_grants:
                self._platform_folders()
        return self.facts

    def _wanted_folders(self) -> tuple[str, ...]:
        return self.cfg.bucket_layout.folders([r.name for r in self.cfg.runs], [d.name for d in self.cfg.datasets])

    def _platform_folders(self) -> None:
        """Folders the stack doesn't declare on a bucket whose grants are the platform team's: those missing,
        with the command that makes them (gcsfuse makes a mount's own folders, not its parents)."""
        leaves = [f for f in self._wanted_folders() if f not in self.facts.folders
                  and not any(o != f and o.startswith(f) for o in self._wanted_folders())]
        if leaves:
            urls = " ".join(f"gs://{self.name}/{f}" for f in leaves)
            self.facts.warnings.append(
                f"gs://{self.name} has hierarchical namespace and the stack's folders {', '.join(leaves)} do not "
                f"exist; the platform team's grants confine the runs to their own prefixes, so gcsfuse can't make "
                f"their parents: `gcloud storage folders create --recursive {urls}`")

    def _cluster_region(self) -> str:
        """The existing cluster's region: its `location` (a region, or a zone of one), else gcp:region."""
        location = self.cfg.existing.location
        zone = ZONE.match(location or "")
        return zone.group("region") if zone else (location or self.cfg.region)

    def _settings(self, bucket: dict) -> None:
        problems, warnings = bucket_problems(bucket, region=self._cluster_region(),
                                             stack_grants=self.cfg.existing.bucket_grants)
        self.facts.problems += problems
        self.facts.warnings += [str(w) for w in warnings]

    def _policy(self) -> dict | None:
        status, body = self.get(f"b/{_quote(self.name)}/iam?optionsRequestedPolicyVersion=3")
        if status != 200 or not isinstance(body, dict):
            self.not_checked("its IAM policy (who writes below the stack's prefixes)", status, body)
            return None
        own = [self._member_suffix(self.cfg.trainer_account), self._member_suffix(self.cfg.stager_account)]
        self.facts.problems += foreign_writers(body, self.name, self.cfg.stack, own)
        return body

    def _member_suffix(self, account: str) -> str:
        """How the stack's principals end (core/ids.py kubernetes_service_account_principal), whatever the
        project number."""
        return (f"/workloadIdentityPools/{workload_identity_pool(self.cfg.project)}/subject/ns/"
                f"{self.cfg.runs_namespace}/sa/{account}")

    def _written(self, prefix: str) -> bool | None:
        status, body = self.get(f"b/{_quote(self.name)}/o?prefix={_quote(prefix + '/')}&maxResults=1")
        if status != 200 or not isinstance(body, dict):
            self.not_checked(f"{prefix}/", status, body)
            return None
        return bool(body.get("items"))

    def _record(self, prefix: str) -> Any:
        status, body = self.get(f"b/{_quote(self.name)}/o/{_quote(f'{prefix}/{PROGRESS}')}?alt=media")
        if status != 200:
            return None
        try:
            return json.loads(body) if isinstance(body, str) else body
        except ValueError:
            return None

    def _legacy_runs(self, policy: dict | None) -> Iterable[str]:
        """The runs whose old prefixes hold their progress, this stack's by its grants; with no policy to tell,
        a run whose old prefix holds anything is refused, naming both ways out."""
        runs, layout = [run.name for run in self.cfg.runs], self.cfg.bucket_layout
        candidates = legacy_grants(policy, self.name, self._member_suffix(self.cfg.trainer_account), runs) \
            if policy is not None else runs
        for run in candidates:
            old, new = legacy_prefix(CHECKPOINT_PREFIX, run), layout.run(run).checkpoints
            old_written = self._written(old)
            if not old_written:
                continue
            new_written = self._written(new)
            if new_written is None or (policy is None and new_written):
                continue  # not checked, or moved already: the new prefixes are the run's
            if policy is None:
                self._unproven(run, old, new)
                continue
            if keeps_legacy(True, new_written, self._record(old), self._record(new) if new_written else None):
                yield run

    def _unproven(self, run: str, old: str, new: str) -> None:
        stack, index = self.cfg.stack, [r.name for r in self.cfg.runs].index(run)
        self.facts.problems.append(Problem(
            f"runs[{index}].name", run, f"has checkpoints in gs://{self.name}/{old}/ from before each stack's prefixes "
            f"carried its name, and the bucket's IAM policy can't be read to tell whether they are this stack's; "
            f"the run would start again in {new}/", f"`make migrate STACK={stack} RUN={run}` if they are "
            "(copies them, verified), or another name for the run if they are not"))

    def _folders(self) -> Iterable[str]:
        """The folders of the stack's layout that exist: each top folder, and every folder below the stack's
        part of each top (folders.list lists a prefix's folders at every depth)."""
        layout, wanted = self.cfg.bucket_layout, self._wanted_folders()
        for top in sorted({f for f in wanted if f.count("/") == 1}):
            status, body = self.get(f"b/{_quote(self.name)}/folders/{_quote(top)}")
            if status == 200:
                yield top
            elif status != 404:
                self.not_checked(f"folder {top}", status, body)
            yield from self._listed(f"{top}{layout.stack}/")

    def _listed(self, prefix: str) -> Iterable[str]:
        token = ""
        while True:
            page = f"&pageToken={_quote(token)}" if token else ""
            status, body = self.get(f"b/{_quote(self.name)}/folders?prefix={_quote(prefix)}{page}")
            if status != 200 or not isinstance(body, dict):
                self.not_checked(f"the folders below {prefix}", status, body)
                return
            yield from (item["name"] for item in body.get("items") or ())
            token = body.get("nextPageToken") or ""
            if not token:
                return


def check(cfg: StackConfig, get: Get | None = None) -> tuple[StackConfig, BucketFacts]:
    """The stack with its legacy runs, and what its bucket showed; ConfigError on a refusal, a warning for each
    thing to change or not checked. Under the SDK's mocks nothing is read (`get` for the tests)."""
    if get is None and under_mocks():
        return cfg, BucketFacts()
    if get is None:
        from google.auth.exceptions import DefaultCredentialsError  # pylint: disable=import-outside-toplevel

        try:
            get = live_get()
        except DefaultCredentialsError as err:  # no credentials at all: the providers say so on their own terms
            pulumi.log.warn(f"gs://{cfg.data_bucket}: not checked: {err}")
            return cfg, BucketFacts()
    facts = BucketReader(cfg, get).read()
    if facts.problems:
        raise ConfigError(facts.problems)
    for warning in facts.warnings:
        pulumi.log.warn(warning)
    for run in sorted(facts.legacy_runs):
        pulumi.log.warn(legacy_note(cfg, run))
    return cfg.with_legacy_runs(facts.legacy_runs), facts


def legacy_note(cfg: StackConfig, run: str) -> str:
    new = cfg.bucket_layout.run(run)
    return (f"run {run} resumes from gs://{cfg.data_bucket}/{legacy_prefix(CHECKPOINT_PREFIX, run)}/ and writes "
            f"{legacy_prefix(PROFILE_PREFIX, run)}/, where it was deployed before each stack's prefixes carried its "
            f"name; `make migrate STACK={cfg.stack} RUN={run}` copies them to {new.checkpoints}/ and {new.profiles}/, "
            "and the next `pulumi up` moves the run there")
