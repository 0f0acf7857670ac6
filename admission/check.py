"""Every admission rule over every run of a stack, before anything is declared.

`admit(config)` builds each run's manifest with the builders the program
applies (images that `pulumi up` builds stand in with a zero digest) and
checks, per run: syntax, the fit of each pod on its pool's nodes, and on
Autopilot what Autopilot admits. A failure is a `Problem` naming the run,
the rule, requested vs available and the rule's source, raised with every
other problem in one ConfigError.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from admission import accelerator_memory, autopilot, fit, local_data, serving, syntax
from admission.findings import Finding
from core.contract import SchedulingContract
from manifests.kueue import kueue_manifests
from manifests.run import build_runs, platform_facts
from manifests.staging import stack_staging_jobs
from stack.config import StackConfig
from stack.images import offline_images
from stack.problems import ConfigError, Problem


def pods(manifest: Mapping) -> Iterator[tuple[str, Mapping]]:
    """(path, pod template) of each replicated job of a JobSet."""
    for i, replicated in enumerate(manifest["spec"]["replicatedJobs"]):
        yield f"spec.replicatedJobs[{i}].template.spec.template", replicated["template"]["spec"]["template"]


def run_findings(manifest: Mapping, contract: SchedulingContract) -> list[Finding]:
    found = syntax.jobset_findings(manifest)
    for where, pod in pods(manifest):
        found += fit.fit_findings(pod, contract.allocatable, f"{where}.requests")
        if contract.autopilot:
            found += autopilot.autopilot_findings(pod, contract.shape.accelerator, where)
    return found


def stack_manifests(config: StackConfig) -> dict[str, dict]:
    facts = platform_facts(config, offline_images(config))
    return build_runs(config.runs, config.contracts(), facts)


def ladder_fit_findings(manifest: Mapping, run, contracts: Mapping[str, SchedulingContract]) -> list[Finding]:
    """The pods' fit on every further rung of the run's ladder (the first is checked with the run)."""
    found = []
    for rung in run.ladder:
        for where, pod in pods(manifest):
            found += fit.fit_findings(pod, contracts[rung].allocatable, f"{where}.requests (pool {rung!r})")
    return found


def kueue_problems(config: StackConfig) -> list[Problem]:
    """The stack's Kueue objects, by the same syntax rules."""
    return [
        Problem("kueue", key, f"would be refused by Kubernetes ({f.rule}): {f.where}: {f.value} {f.why} ({f.source})")
        for key, manifest in kueue_manifests(config.kueue_flavors()).items()
        for f in syntax.kueue_findings(manifest)
    ]


def memory_problems(config: StackConfig, manifests: Mapping[str, Mapping]) -> list[Problem]:
    """Each run whose model does not fit its pool's chips (admission/accelerator_memory.py)."""
    problems, contracts = [], config.contracts()
    for i, run in enumerate(config.runs):
        container = next(iter(manifests[run.name]["spec"]["replicatedJobs"]))["template"]["spec"]["template"]
        found = accelerator_memory.run_memory(run, contracts[run.pool], container["spec"]["containers"][0])
        if found is not None and not found.fits:
            problems.append(Problem(f"runs[{i}]", run.name, accelerator_memory.why(found),
                                    "a pool of more (or larger) chips; --fsdp or LoRA where the trainer has them; a "
                                    "smaller model, batch or sequence length"))
    return problems


def admission_problems(config: StackConfig) -> list[Problem]:
    manifests, contracts = stack_manifests(config), config.contracts()
    problems = kueue_problems(config) + memory_problems(config, manifests)
    for i, run in enumerate(config.runs):
        findings = run_findings(manifests[run.name], contracts[run.pool])
        for finding in findings + ladder_fit_findings(manifests[run.name], run, contracts):
            problems.append(Problem(
                f"runs[{i}]", run.name,
                f"would be refused by GKE ({finding.rule}): {finding.where}: {finding.value} {finding.why} "
                f"({finding.source})",
            ))
    return problems


def staging_problems(config: StackConfig) -> list[Problem]:
    """The staging Jobs by Kubernetes' syntax rules (names, labels, volumes)."""
    jobs, problems = stack_staging_jobs(config, offline_images(config)), []
    for i, dataset in enumerate(config.datasets):
        if dataset.name not in jobs:  # a `path`: uploaded by `pulumi up`, no Job
            continue
        job = jobs[dataset.name]
        found = [*syntax.object_name_findings(job["metadata"], "metadata"),
                 *syntax.metadata_findings(job["metadata"], "metadata"),
                 *syntax.pod_findings(job["spec"]["template"], "spec.template")]
        problems += [Problem(f"datasets[{i}]", dataset.name, f"would be refused by Kubernetes ({f.rule}): {f.where}: "
                             f"{f.value} {f.why} ({f.source})") for f in found]
    return problems


def admit(config: StackConfig) -> StackConfig:
    """The config, once every run passes every rule; else a ConfigError listing each failure."""
    problems = (admission_problems(config) + staging_problems(config) + local_data.first_rows_problems(config)
                + serving.serving_problems(config))
    if problems:
        raise ConfigError(problems)
    return config


def fit_table(config: StackConfig) -> list[dict]:
    """Per run (and the server, `serve <run>`) and resource: the pod's request, the node's allocatable and the
    headroom."""
    manifests, contracts, rows = stack_manifests(config), config.contracts(), []
    pods_by_name = [(run.name, contracts[run.pool], next(pods(manifests[run.name]))[1]) for run in config.runs]
    for manifest in serving.serve_manifests(config).values():
        if manifest["kind"] == "Deployment":
            pods_by_name.append((f"serve {config.serve.run}", contracts[config.serve.pool], manifest["spec"]["template"]))
    for name, contract, pod in pods_by_name:  # every replicated job of a run has the same pod
        for line in fit.fit_lines(pod, contract.allocatable):
            rows.append({
                "run": name,
                "node": f"{contract.shape.machine_type}" + (" (Autopilot)" if contract.autopilot else ""),
                "resource": line.resource,
                "requested": line.shown(line.requested),
                "allocatable": line.shown(line.allocatable),
                "headroom": line.shown(line.allocatable - line.requested),
                "margin": line.shown(line.margin) if line.margin else "",
                "fits": line.fits,
            })
    return rows
