"""Rules of a stack file that are not about one pool or run, as pure functions returning `Problem`s.

Zones, the bucket name, the cluster mode against pools and shapes, unique
names. Rules about one pool or shape live with its model (stack/models.py),
rules about runs with theirs (stack/runs.py). No Pulumi import.
"""

from __future__ import annotations

import importlib
import re

from core.names import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from core.offerings import SOURCES, offered_regions, offered_zones
from core.syntax import ZONE, dns_1123_label_problem
from core.trainers import TRAINERS
from stack.problems import Problem


def zone_problems(key: str, zones: tuple[str, ...], region: str | None) -> list[Problem]:
    problems = []
    for j, zone in enumerate(zones):
        m = ZONE.fullmatch(zone)
        if not m or (region and m.group("region") != region):
            where = f"region {region!r}" if region else "a valid region"
            problems.append(Problem(f"{key}[{j}]", zone, f"is not a zone of {where}", f"{region or '<region>'}-<letter>"))
    return problems


def offering_problems(pools: list[tuple[str, str, str, tuple[str, ...]]], region: str) -> list[Problem]:
    """Each pool's zones against where its accelerator is offered (core/offerings.py); `pools` holds
    (key, pool name, accelerator, zones). A region that offers the accelerator nowhere is the one
    problem of its pools (their zones are wrong because the region is)."""
    problems, refused_regions = [], set()
    for key, pool, accelerator, zones in pools:
        if accelerator not in SOURCES:
            continue
        if not offered_zones(accelerator, region):
            if accelerator not in refused_regions:
                refused_regions.add(accelerator)
                problems.append(Problem("gcp:region", region, f"offers no {accelerator} (pool {pool!r}; "
                                        f"{SOURCES[accelerator]})",
                                        f"a region that does: {', '.join(offered_regions(accelerator))}"))
            continue
        for j, zone in enumerate(zones):
            if zone not in offered_zones(accelerator):
                problems.append(Problem(f"{key}[{j}]", zone, f"does not offer {accelerator} (pool {pool!r}; "
                                        f"{SOURCES[accelerator]})",
                                        ", ".join(offered_zones(accelerator, region))))
    return problems


# The project id of the shipped stack files, a placeholder for the user's own. Planning and testing with it
# is fine; `pulumi up` with it would try to create everything in a project that is not the user's.
PLACEHOLDER_PROJECT = "my-project-id"


def placeholder_problems(project: str) -> list[Problem]:
    if project != PLACEHOLDER_PROJECT:
        return []
    return [Problem("gcp:project", project, "is the shipped stack files' placeholder, refused for `pulumi up` "
                    "(plan and preview take it)",
                    "your project's id: `pulumi config set gcp:project <id>` (`gcloud projects list` lists them)")]


# Namespaces a stack's runs may not live in: Kubernetes' and GKE's own, and the controllers'.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces
# ("Avoid creating namespaces with the prefix kube-, since it is reserved for Kubernetes system namespaces");
# GKE runs its own components in gke-* and gmp-* namespaces (gke-managed-system, gmp-system, gmp-public).
RESERVED_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")
RESERVED_NAMESPACES = ("default", JOBSET_NAMESPACE, KUEUE_NAMESPACE)


def namespace_problems(key: str, name: str) -> list[Problem]:
    allowed = ("a DNS-1123 label of your own (not default, jobset-system, kueue-system, kube-*, gke-*, gmp-*)")
    why = dns_1123_label_problem(name)
    if why is None and (name in RESERVED_NAMESPACES or name.startswith(RESERVED_NAMESPACE_PREFIXES)):
        why = "is a namespace of Kubernetes, GKE or the controllers"
    return [Problem(key, name, why, allowed)] if why else []


def bucket_problems(key: str, name: str) -> list[Problem]:
    """https://cloud.google.com/storage/docs/buckets#naming (names without dots)."""
    rules = [
        (3 <= len(name) <= 63, "3 to 63 characters"),
        (re.fullmatch(r"[a-z0-9][a-z0-9_-]*[a-z0-9]", name) is not None,
         "lowercase letters, digits, '-' and '_', starting and ending with a letter or digit"),
        (not name.startswith("goog") and "google" not in name, "no 'goog' prefix and no 'google'"),
    ]
    return [Problem(key, name, "breaks GCS bucket naming", rule) for ok, rule in rules if not ok]


def mode_problems(autopilot: bool, pools: tuple, shapes: tuple) -> list[Problem]:
    if autopilot:
        problems = []
        if pools:
            problems.append(Problem(
                "pools", f"{len(pools)} pool(s)", "declared in autopilot mode",
                "none (Autopilot provisions accelerator nodes from the runs' selectors; declare `shapes:`)",
            ))
        problems += [
            Problem(f"shapes[{i}].capacity", "queued", "is not offered on Autopilot",
                    "on-demand, spot, reservation, flex-start")
            for i, s in enumerate(shapes)
            if s.capacity == "queued"
        ]
        # Multislice pods talk over DCN with host networking, which Autopilot
        # refuses (GKE Warden's autogke-disallow-hostnamespaces).
        # https://cloud.google.com/kubernetes-engine/docs/concepts/autopilot-security#built-in-security
        problems += [
            Problem(f"shapes[{i}].slices", s.slices, "needs host networking for multislice, which Autopilot refuses",
                    "1 on Autopilot (a Standard cluster's `pools:` for multislice)")
            for i, s in enumerate(shapes)
            if s.slices > 1
        ]
        return problems
    if shapes:
        return [Problem("shapes", f"{len(shapes)} shape(s)", "declared in standard mode", "none (declare `pools:`)")]
    return []


def unique_name_problems(key: str, groups: tuple) -> list[Problem]:
    seen: set[str] = set()
    problems = []
    for i, group in enumerate(groups):
        if group.name in seen:
            problems.append(Problem(f"{key}[{i}].name", group.name, "is used twice", "unique names"))
        seen.add(group.name)
    return problems


def dataset_stack_problems(datasets: tuple, runs: tuple) -> list[Problem]:
    """Unique dataset names; every run's `data` names a dataset the stack stages; tokenizers exist."""
    problems = unique_name_problems("datasets", datasets)
    names = [d.name for d in datasets]
    for i, run in enumerate(runs):
        keyed = [("data", run.data)] if run.data else [(f"mix[{j}].data", s.data) for j, s in enumerate(run.mix)]
        for key, data in keyed:
            if data and data.partition("/")[0] not in names:
                problems.append(Problem(f"runs[{i}].{key}", data, f"on run {run.name!r} names no dataset of the "
                                        f"stack", f"a dataset of `datasets:` ({', '.join(names) or 'none declared'}), "
                                        "or a path inside one"))
    for i, d in enumerate(datasets):
        if d.tokenize:
            problems += [Problem(f"datasets[{i}].tokenize", d.tokenize, f"is refused by the trainer: {line}",
                                 "a model of a trainer that reads token shards")
                         for line in tokenizer_problems(d.tokenize)]
    return problems


def tokenizer_problems(model: str) -> list[str]:
    """What the token-shard trainers' own flag declarations say of `--model <model>`."""
    import_name = [row.flags_module for row in TRAINERS.values() if row.token_shards_module]
    return [p for module in import_name for p in importlib.import_module(module).argument_problems(["--model", model])]
