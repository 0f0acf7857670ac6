"""What a stack says about sharing its pools and its Kueue with other stacks: its quota of each pool, and the
settings of the Kueue it installs.

Several stacks (teams) may run on the same node pool of one cluster, each
through its own ClusterQueue. A ClusterQueue's nominal quota is what Kueue
admits against, so the quotas of the ClusterQueues that share a pool must
together fit the pool, or both stacks' runs are admitted and their pods wait
for nodes that never come. A stack says its part of a pool
(`pools[].quota.chips`; its node resources in proportion), and the platform
team hands each team a part that, summed, is the pool (the preflight reads the
other ClusterQueues on the pool and refuses more: admission/shared_pools.py).

The ClusterQueues of a shared pool share its ResourceFlavor, named from the
nodes it selects (core/names.py `shared_flavor_name`), and are in one cohort
(`cohort_name`): Kueue lends and borrows only between queues of one cohort, and
only quota of a flavor both name
(https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#cohort; v0.19.2
apis/kueue/v1beta2/clusterqueue_types.go `cohortName`, `borrowingLimit`,
`lendingLimit`). So a team may use another's idle part of the pool
(`borrowingLimitChips`, `lendingLimitChips`; no limit by default, a share of 0
borrows only) and takes its own back by preemption when it needs it
(`reclaimWithinCohort: Any`: the borrower's run checkpoints on SIGTERM and is
requeued).

`kueue` holds the settings of the Kueue a stack installs (its own cluster, or
`existingCluster.controllers: install`): how long an admitted run may wait for
all its pods to be ready before Kueue evicts and requeues it
(`waitForPodsReady`), how long it backs off before a requeue and how often it
is requeued before it is deactivated, and which other teams' namespaces it
manages besides the stack's own (`managedNamespaces`: their stacks use it with
`controllers: existing`). Kueue's configuration API
(config.kueue.x-k8s.io/v1beta2, sigs.k8s.io/kueue v0.19.2
apis/config/v1beta2/configuration_types.go; the chart's commented example,
charts/kueue/values.yaml); the real kueue-manager loads exactly this
(e2e/tests/test_kueue_config.py). A Kueue the platform team installed
(`controllers: existing`) has its own configuration: these keys are refused
there.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic.alias_generators import to_camel

from core.syntax import is_dns_label
from stack.models import Count, StackModel
from stack.problems import Problem

# Kueue's own defaults are a 5-minute timeout and no requeue limit; a run that waits for new nodes (a pool
# scaling up from zero, a queued slice) needs longer, and a run whose pods can't be placed is deactivated
# after this many evictions instead of cycling for ever.
PODS_READY_TIMEOUT_SECONDS = 1800
REQUEUE_BACKOFF_SECONDS = 60
REQUEUE_BACKOFF_MAX_SECONDS = 3600
REQUEUE_LIMIT = 10


class KueueSettings(StackModel):
    """`kueue`: the Kueue the stack installs."""

    pods_ready_timeout_seconds: Count = Field(default=PODS_READY_TIMEOUT_SECONDS, ge=1)
    requeue_backoff_seconds: Count = Field(default=REQUEUE_BACKOFF_SECONDS, ge=1)
    requeue_limit: Count = Field(default=REQUEUE_LIMIT, ge=0)
    # Other teams' namespaces on the cluster whose runs this Kueue manages too (their stacks say
    # `controllers: existing`); the stack's own namespace always.
    managed_namespaces: tuple[str, ...] = ()


def sharing_problems(config: Any) -> list[Problem]:
    """The problems of each pool's `quota` and of `kueue` (a StackConfig)."""
    flavors = {c.pool for c in config.kueue_flavors()}
    contracts = config.contracts()
    problems = []
    for i, pool in enumerate(config.pools):
        if pool.quota is not None:
            problems += [p.under(f"pools[{i}].quota") for p in
                         _quota_problems(pool.name, pool.quota, contracts[pool.name], pool.name in flavors)]
    return problems + _settings_problems(config, bool(flavors))


def _quota_problems(pool: str, quota: Any, contract: Any, queued: bool) -> list[Problem]:
    where = f"of pool {pool!r}"
    if not queued:
        return [Problem("chips", quota.chips, f"{where}, on which no run goes through Kueue: no ClusterQueue "
                        "would hold it", "no quota, or a run with a ladder, priority or queued capacity on the pool")]
    whole, per_run = contract.quota_chips, contract.total_chips
    if quota.chips > whole:
        return [Problem("chips", quota.chips, f"{where}, which holds {whole} chips at most",
                        f"0..{whole} in steps of {per_run}, this stack's part of the pool")]
    if quota.chips % per_run:
        return [Problem("chips", quota.chips, f"{where}: a run on it takes {per_run} chips (its whole slices), "
                        "and a quota between whole runs admits none of the rest", f"a multiple of {per_run}, "
                        f"at most {whole}")]
    if quota.chips == 0 and quota.borrowing_limit_chips == 0:
        return [Problem("chips", 0, f"{where} with borrowingLimitChips 0: the stack's queue could admit no run on it",
                        f"a positive multiple of {per_run}, or a borrowing limit that holds a run")]
    return _limit_problems(where, quota, whole, per_run)


def _limit_problems(where: str, quota: Any, whole: int, per_run: int) -> list[Problem]:
    """The cohort's limits: whole runs, borrowing at most the rest of the pool, lending at most the share."""
    problems = []
    for key, value, most in (("borrowingLimitChips", quota.borrowing_limit_chips, whole - quota.chips),
                             ("lendingLimitChips", quota.lending_limit_chips, quota.chips)):
        if value is not None and (value > most or value % per_run):
            problems.append(Problem(key, value, f"{where}: a run takes {per_run} chips, and the limit is at most "
                                    f"{most} chips ({'the rest of the pool' if key[0] == 'b' else 'the share'})",
                                    f"a multiple of {per_run} from 0 to {most}, or no limit"))
    return problems


def _namespace_problems(settings: KueueSettings) -> list[Problem]:
    return [Problem(f"kueue.managedNamespaces[{i}]", name, "is not a namespace name",
                    "a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
            for i, name in enumerate(settings.managed_namespaces) if not is_dns_label(name)]


def _settings_problems(config: Any, queued: bool) -> list[Problem]:
    settings, default = config.kueue, KueueSettings()
    changed = [k for k in type(settings).model_fields if getattr(settings, k) != getattr(default, k)]
    existing = config.existing is not None and config.existing.controllers == "existing"
    problems = []
    for name in changed:
        key = f"kueue.{to_camel(name)}"
        if existing:
            problems.append(Problem(key, getattr(settings, name), "but existingCluster.controllers is existing: "
                                    "the platform team's Kueue has its own configuration",
                                    f"no {key} (the platform team sets waitForPodsReady in its Kueue)"))
        elif not queued:
            problems.append(Problem(key, getattr(settings, name), "but the stack installs no Kueue (no run goes "
                                    "through it)", f"no {key}"))
    return problems + _namespace_problems(settings)
