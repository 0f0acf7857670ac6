"""A bucket the stack reads before it declares anything in it, judged: its settings, who writes where, and where a
run's checkpoints are. Pure functions over the Cloud Storage JSON API's answers (components/bucket_preflight.py
and `make doctor` read them), in the shapes of the discovery document's `Bucket` and `Policy` schemas.

An existing bucket (an existing cluster's `bucketName`):
- uniform bucket-level access off: the per-run and per-dataset write grants are conditional IAM bindings, and
  IAM Conditions work on a bucket only with uniform bucket-level access
  (https://cloud.google.com/storage/docs/uniform-bucket-level-access: "IAM also allows you to use features
  that are not available when working with ACLs, such as IAM Conditions";
  https://cloud.google.com/iam/docs/conditions-overview#resources). Refused where the stack declares the
  grants; a warning where the platform team grants them.
- public access prevention not `enforced`: checkpoints and data could be made public by a grant to allUsers
  (https://cloud.google.com/storage/docs/public-access-prevention). A warning.
- a location other than the cluster's region: "For maximum performance and lowest latency, store data in the
  same region as the compute resources that use it", and reading a multi-region bucket always pays outbound
  data transfer, reading a region or dual-region from within it never does
  (https://cloud.google.com/storage/docs/locations, "Location considerations"). A warning.

A run deployed before the bucket's prefixes carried the stack (core/names.py) wrote `checkpoints/<run>/`; it
keeps those prefixes (`keeps_legacy`) until `make migrate` copies them. Whether the old prefix is this stack's
is told by the bucket's IAM policy: the stack's trainer principal was granted writes below exactly it.
Another principal granted writes below this stack's prefixes is another stack of the same name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.names import CHECKPOINT_PREFIX, TOP_PREFIXES, legacy_prefix, stack_prefix
from stack.problems import Problem

# Google's predefined dual-regions and the regions they hold (https://cloud.google.com/storage/docs/locations,
# "Predefined dual-regions"); a configurable dual-region lists its own in customPlacementConfig.dataLocations.
PREDEFINED_DUAL_REGIONS = {
    "ASIA1": ("asia-northeast1", "asia-northeast2"),
    "EUR4": ("europe-north1", "europe-west4"),
    "EUR5": ("europe-west1", "europe-west2"),
    "EUR7": ("europe-west3", "europe-west10"),
    "EUR8": ("europe-west3", "europe-west6"),
    "NAM4": ("us-central1", "us-east1"),
}
_STARTS_WITH = re.compile(r'resource\.name\.startsWith\("([^"]*)"\)')


@dataclass(frozen=True)
class BucketWarning:
    """A setting the stack works with, and what to change for the better."""

    setting: str
    value: object
    why: str
    fix: str

    def __str__(self) -> str:
        return f"{self.setting}: {self.value!r} {self.why}; fix: {self.fix}"


def iam_configuration(bucket: Mapping) -> tuple[bool, str]:
    """(uniform bucket-level access on, public access prevention) as buckets.get returns them; the API leaves out
    what is off (Bucket.iamConfiguration.uniformBucketLevelAccess.enabled, .publicAccessPrevention)."""
    iam = bucket.get("iamConfiguration") or {}
    uniform = bool((iam.get("uniformBucketLevelAccess") or {}).get("enabled"))
    return uniform, iam.get("publicAccessPrevention") or "inherited"


def hierarchical_namespace(bucket: Mapping) -> bool:
    return bool((bucket.get("hierarchicalNamespace") or {}).get("enabled"))


def regions_of(bucket: Mapping) -> tuple[str, tuple[str, ...]]:
    """(location type, the regions its data lies in: none for a multi-region)."""
    location, kind = str(bucket.get("location", "")), str(bucket.get("locationType", "")).lower()
    if kind == "region":
        return kind, (location.lower(),)
    if kind == "dual-region":
        custom = (bucket.get("customPlacementConfig") or {}).get("dataLocations") or ()
        return kind, tuple(r.lower() for r in custom) or PREDEFINED_DUAL_REGIONS.get(location.upper(), ())
    return kind or "multi-region", ()


def bucket_problems(bucket: Mapping, *, region: str, stack_grants: bool) -> tuple[list[Problem], list[BucketWarning]]:
    """An existing bucket's settings against what the stack needs: refusals (as `bucketName` problems) and
    warnings. `stack_grants`: the stack declares its conditional grants (existingCluster.bucketGrants)."""
    name = bucket.get("name", "")
    url = f"gs://{name}"
    problems, warnings = [], []
    uniform, prevention = iam_configuration(bucket)
    enable = f"`gcloud storage buckets update {url} --uniform-bucket-level-access`"
    if not uniform and stack_grants:
        problems.append(Problem(
            "bucketName", name, "has uniform bucket-level access off (iamConfiguration.uniformBucketLevelAccess."
            "enabled: false), and IAM Conditions, which confine each run and dataset to its own prefixes, work "
            "only with it: Cloud Storage refuses the stack's conditional grants",
            f"a bucket with uniform bucket-level access: {enable} (ACLs stop applying)"))
    elif not uniform:
        warnings.append(BucketWarning(
            "iamConfiguration.uniformBucketLevelAccess.enabled", False,
            f"on {url}: the platform team's grants can't be confined to the stack's prefixes (IAM Conditions need "
            "uniform bucket-level access), and object ACLs still apply", enable))
    if prevention != "enforced":
        warnings.append(BucketWarning(
            "iamConfiguration.publicAccessPrevention", prevention,
            f"on {url}: a grant to allUsers or allAuthenticatedUsers would make checkpoints and data public "
            "(unless an organization policy enforces prevention)",
            f"`gcloud storage buckets update {url} --public-access-prevention`"))
    where = location_warning(bucket, region)
    return problems, warnings + ([where] if where else [])


def location_warning(bucket: Mapping, region: str) -> BucketWarning | None:
    """None where the bucket's data lies in `region` (the region itself, or a dual-region holding it)."""
    kind, regions = regions_of(bucket)
    if region in regions:
        return None
    location = str(bucket.get("location", ""))
    cost = ("every read pays outbound data transfer (a multi-region)" if kind == "multi-region"
            else "reads cross regions: slower, and billed as data transfer between regions")
    return BucketWarning("location", location, f"({kind}) of gs://{bucket.get('name', '')} is not the cluster's region "
                    f"{region}: {cost}", f"a bucket in {region} (bucketName), or the cluster in the bucket's region")


def _prefixes(expression: str, bucket: str) -> list[tuple[str, str]]:
    """(kind, prefix) of each `resource.name.startsWith(...)` of a condition: kind `objects` or `folders`."""
    found = []
    for literal in _STARTS_WITH.findall(expression or ""):
        head = f"projects/_/buckets/{bucket}/"
        if literal.startswith(head):
            kind, _, prefix = literal.removeprefix(head).partition("/")
            found.append((kind, prefix))
    return found


def _conditional(policy: Mapping) -> Iterable[tuple[Mapping, str]]:
    for binding in policy.get("bindings") or ():
        condition = binding.get("condition") or {}
        if condition.get("expression"):
            yield binding, condition["expression"]


def legacy_grants(policy: Mapping, bucket: str, member_suffix: str, runs: Iterable[str]) -> list[str]:
    """The runs whose old checkpoints prefix (`checkpoints/<run>/`) the policy grants the stack's trainer
    (a member ending in `member_suffix`) writes below: runs this stack deployed before prefixes carried it."""
    granted = set()
    for binding, expression in _conditional(policy):
        if any(m.endswith(member_suffix) for m in binding.get("members") or ()):
            granted |= {p for kind, p in _prefixes(expression, bucket) if kind == "objects"}
    return [run for run in runs if f"{legacy_prefix(CHECKPOINT_PREFIX, run)}/" in granted]


def foreign_writers(policy: Mapping, bucket: str, stack: str, own_suffixes: Iterable[str]) -> list[Problem]:
    """Another principal granted writes below this stack's prefixes: another stack of the same name (another
    repository, namespace or project) on the bucket, which would write the same objects."""
    own = tuple(own_suffixes)
    mine = tuple(f"{stack_prefix(top, stack)}/" for top in TOP_PREFIXES)
    problems = []
    for binding, expression in _conditional(policy):
        touched = sorted({p for _, p in _prefixes(expression, bucket) if p.startswith(mine)})
        others = sorted(m for m in binding.get("members") or () if not m.endswith(own))
        if touched and others:
            problems.append(Problem(
                "stack", stack, f"names prefixes another principal of gs://{bucket} may write below ({others[0]}: "
                f"role {binding.get('role')} on {touched[0]}): another stack of the same name would write this "
                "stack's objects", "a stack name no other stack on this bucket uses (`pulumi stack rename "
                "<name>`), or a bucket of the stack's own (bucketName)"))
    return problems


def checkpoint_step(record: object) -> int:
    """The newest checkpoint a progress record names (-1: none, or no record)."""
    step = record.get("checkpoint_step") if isinstance(record, Mapping) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else -1


def keeps_legacy(old_written: bool, new_written: bool, old_record: object = None, new_record: object = None) -> bool:
    """Whether a run keeps its old prefixes: they hold its checkpoints and the new ones nothing, or less progress
    (a checkpoint written to the old prefixes after `make migrate` copied them: migrate again)."""
    if not old_written:
        return False
    return not new_written or checkpoint_step(old_record) > checkpoint_step(new_record)
