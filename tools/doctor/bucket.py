"""The doctor's bucket check: the reads `pulumi preview` makes of the stack's bucket (components/bucket_preflight.py,
judged by admission/shared_bucket.py), made with the doctor's answers, so a refusal or a warning is found before
the first `pulumi up`.

- An existing cluster's bucket (`bucketName`): it exists; uniform bucket-level access (refused without it where the
  stack declares its conditional grants), public access prevention, its location against the cluster's region;
  another stack of the same name granted writes below this stack's prefixes; folders a bucket with hierarchical
  namespace lacks where the grants are the platform team's.
- The stack's own bucket: not there yet (`pulumi up` creates it), or there and the stack's (a deployed stack);
  a 403 means the name is taken (bucket names are global: https://cloud.google.com/storage/docs/buckets#naming).
- Either: the runs deployed before the prefixes carried the stack, which `make migrate` copies.

GETs of the Cloud Storage JSON API (https://cloud.google.com/storage/docs/json_api/v1/buckets/get, getIamPolicy,
objects/list, folders/list) with the Application Default Credentials' token.
"""

from __future__ import annotations

from typing import Any

from components.bucket_preflight import API, BucketReader
from core.names import CHECKPOINT_PREFIX, legacy_prefix
from stack.config import StackConfig
from tools.doctor.checks import MISS, OK, SKIP, WARN, Finding


def _getter(answers, token: str):
    def get(path: str) -> tuple[int, Any]:
        got = answers.get(f"{API}/{path}", token)
        return got.status, got.body if got.status else got.error
    return get


def _warning(check: str, text: str) -> Finding:
    detail, _, fix = text.partition("; fix: ")
    return Finding(check, WARN, detail, fix)


def _declared(config: StackConfig) -> str:
    return (f"to be created by `pulumi up` in {config.region}: uniform bucket-level access, public access prevention "
            "enforced, hierarchical namespace, kept on destroy")


def bucket_findings(answers, config: StackConfig, token: str) -> list[Finding]:
    check, url = "bucket", f"gs://{config.data_bucket}"
    if not token:
        return [Finding(check, SKIP, "no access token (Application Default Credentials, above)")]
    get = _getter(answers, token)
    status, body = get(f"b/{config.data_bucket}")
    own = config.existing is None
    if own and status == 404:
        return [Finding(check, OK, f"{url} {_declared(config)}")]
    if own and status == 403:
        return [Finding(check, MISS, f"{url} exists and your account may not read it: another project's bucket "
                        "(bucket names are global), or one you lack storage.buckets.get on",
                        "a name of the stack's own: `gke-finetune:bucketName` in the stack file")]
    if status not in (200, 404):
        detail = body.get("error", {}).get("message", "") if isinstance(body, dict) else str(body)
        return [Finding(check, MISS, f"{url}: HTTP {status}: {detail}" if status else f"{url}: no answer ({detail})",
                        "your account needs storage.buckets.get and storage.buckets.getIamPolicy on it "
                        "(roles/storage.admin, or the platform team's grant)")]
    facts = BucketReader(config, get).read()
    found = [Finding(check, MISS, f"{p.key}: {p.value!r} {p.why}", p.allowed) for p in facts.problems]
    found += [_warning(check, w) for w in facts.warnings]
    found += [Finding(f"run {run}", WARN, f"resumes from {url}/{legacy_prefix(CHECKPOINT_PREFIX, run)}/, where it was "
                      "deployed before each stack's prefixes carried its name",
                      f"`make cancel`, `make migrate STACK={config.stack} RUN={run}`, then `make resume`: it moves to "
                      f"{config.bucket_layout.run(run).checkpoints}/") for run in sorted(facts.legacy_runs)]
    if found:
        return found
    where = f"{facts.bucket.get('location', '?')} ({facts.bucket.get('locationType', '?')})" if facts.bucket else "?"
    return [Finding(check, OK, f"{url}: uniform bucket-level access, public access prevention enforced, in {where}")
            if not own else Finding(check, OK, f"{url}: the stack's, in {where}")]
