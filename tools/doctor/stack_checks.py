"""Which checks a stack needs, and the answers each reads (checks.py says what each answer means).

The quotas a pool spends, by its accelerator and capacity, as Compute Engine's quota ids in the Cloud
Quotas API name them (https://cloud.google.com/docs/quotas/view-manage; the ids listed by
`gcloud beta quotas info list --service=compute.googleapis.com`): on demand, the regional family quota
with its `tpu_family` or `gpu_family` dimension; Spot, flex-start and queued capacity, the
preemptible quota (Dynamic Workload Scheduler's VMs spend preemptible quota:
https://cloud.google.com/kubernetes-engine/docs/concepts/dws). A reservation's capacity was granted
when it was made: its check is the reservation's own (exists, in the pool's zone, free VMs).
"""

from __future__ import annotations

import os
from urllib.parse import quote

from core.names import PROJECT
from stack.apis import required_apis
from stack.config import StackConfig
from stack.images import trainers_to_build
from stack.rules import PLACEHOLDER_PROJECT
from stack.secrets import needs_hf_token
from tools.doctor import checks
from tools.doctor.bucket import bucket_findings
from tools.doctor.checks import CLOUD_QUOTAS, COMPUTE, HUB, SERVICE_USAGE, Finding

PREEMPTIBLE = ("spot", "flex-start", "queued")
QUOTAS: dict[tuple[str, bool], tuple[str, dict[str, str]]] = {
    ("tpu-v6e", False): ("TPUS-PER-TPU-FAMILY-per-project-region", {"tpu_family": "CT6E"}),
    ("tpu-v6e", True): ("PREEMPTIBLE-TPU-V6E-per-project-region", {}),
    ("nvidia-b200", False): ("GPUS-PER-GPU-FAMILY-per-project-region", {"gpu_family": "NVIDIA_B200"}),
    ("nvidia-b200", True): ("PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region", {}),
}
COMMANDS = {
    "pulumi": ["pulumi", "version"],
    "gcloud": ["gcloud", "auth", "list", "--format=json"],
    "adc": ["gcloud", "auth", "application-default", "print-access-token"],
    "plugin": ["gke-gcloud-auth-plugin", "--version"],
    "buildx": ["docker", "buildx", "version"],
    "engine": ["docker", "info", "--format", "{{.ServerVersion}}"],
}


def tool_findings(answers, config: StackConfig) -> tuple[list[Finding], str]:
    """The programs' checks, and the access token the API checks use ('' without one)."""
    ran = {key: answers.run(argv) for key, argv in COMMANDS.items() if key not in ("buildx", "engine")}
    token = ran["adc"].stdout.strip() if ran["adc"].code == 0 else ""
    if hasattr(answers, "hide"):
        answers.hide(token)
    found = [checks.project_id(config.project, PLACEHOLDER_PROJECT), checks.pulumi_cli(ran["pulumi"]),
             checks.gcloud_account(ran["gcloud"]), checks.adc(ran["adc"]), checks.auth_plugin(ran["plugin"])]
    return found, token


def _services(answers, config: StackConfig, token: str):
    return answers.get(f"{SERVICE_USAGE}/projects/{config.project}/services?filter=state:ENABLED&pageSize=200", token)


def api_findings(answers, config: StackConfig, token: str) -> list[Finding]:
    to_build = trainers_to_build(config)
    services = _services(answers, config, token) if token else None
    enabled = checks.enabled_services(services) if services is not None else None
    if config.image_builder == "docker" and to_build:
        builder = checks.image_builder("docker", to_build, answers.run(COMMANDS["buildx"]), answers.run(COMMANDS["engine"]),
                                       enabled)
    else:
        builder = checks.image_builder(config.image_builder, to_build, checks.Ran(0), checks.Ran(0), enabled)
    if not token:
        return [builder, Finding("project APIs", checks.SKIP, "no access token (Application Default Credentials, above)")]
    if config.existing is not None:
        apis = Finding("project APIs", checks.SKIP, "an existing cluster's stack enables no API")
    else:
        apis = checks.project_apis(config.project, required_apis(config), services)
    return [builder, apis]


def needed_quota(config: StackConfig) -> dict[tuple[str, tuple], tuple[str, int]]:
    """(quota id, dimensions) -> (what, chips the stack's pools can hold at once)."""
    need: dict[tuple[str, tuple], tuple[str, int]] = {}
    for name, contract in config.contracts().items():
        if contract.capacity == "reservation":
            continue
        accelerator = contract.shape.accelerator.name
        quota_id, dims = QUOTAS[(accelerator, contract.capacity in PREEMPTIBLE)]
        key = (quota_id, tuple(sorted(dims.items())))
        what = f"{accelerator} {'preemptible' if contract.capacity in PREEMPTIBLE else 'on-demand'}"
        need[key] = (what, need.get(key, (what, 0))[1] + contract.quota_chips)
    return need


def quota_findings(answers, config: StackConfig, token: str) -> list[Finding]:
    if config.existing is not None:
        return [Finding("quota", checks.SKIP, "an existing cluster's node pools are the platform team's")]
    if not token:
        return [Finding("quota", checks.SKIP, "no access token (Application Default Credentials, above)")]
    out = []
    for (quota_id, dims), (what, chips) in sorted(needed_quota(config).items()):
        url = f"{CLOUD_QUOTAS}/projects/{config.project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota_id}"
        out.append(checks.quota(what, chips, config.region, answers.get(url, token), quota_id, dict(dims)))
    return out


def reservation_findings(answers, config: StackConfig, token: str) -> list[Finding]:
    out = []
    for group in config.accelerator_groups():
        contract = config.contracts()[group.name]
        if contract.capacity != "reservation" or not contract.reservation:
            continue
        project, _, name = contract.reservation.rpartition("/reservations/")
        project = project.removeprefix("projects/") or config.project
        if not token:
            out.append(Finding(f"reservation {name}", checks.SKIP, "no access token (above)"))
            continue
        zones = config.pool_zones(group) if not config.autopilot and config.existing is None else ()
        if not zones:
            out.append(Finding(f"reservation {name}", checks.SKIP, f"{group.name}: its zone is GKE's choice here; "
                               f"check it is in {config.region}: `gcloud compute reservations list`"))
        for zone in zones:
            got = answers.get(f"{COMPUTE}/projects/{project}/zones/{zone}/reservations/{name}", token)
            out.append(checks.reservation(group.name, name, zone, contract.shape.machine_type, contract.vms, got))
    return out


def hub_models(config: StackConfig) -> list[str]:
    """The Hub models the stack's runs read: each run's `--model_id` (the GPU trainer's flag)."""
    models = []
    for run in config.runs:
        args = list(run.args)
        for i, arg in enumerate(args):
            value = arg.split("=", 1)[1] if arg.startswith("--model_id=") else (
                args[i + 1] if arg == "--model_id" and i + 1 < len(args) else None)
            if value and value not in models:
                models.append(value)
    return models


def hub_findings(answers, config: StackConfig) -> list[Finding]:
    if not needs_hf_token(config.runs, config.datasets):
        return [Finding("Hugging Face token", checks.SKIP, "no run or dataset reads the Hub with it")]
    token, where = os.environ.get("HF_TOKEN", ""), "HF_TOKEN"
    if not token:
        ran = answers.run(["pulumi", "config", "get", f"{PROJECT}:hfToken", "--stack", config.stack])
        token, where = (ran.stdout.strip() if ran.code == 0 else ""), "the stack's hfToken"
    if hasattr(answers, "hide"):
        answers.hide(token)
    whoami = answers.get(f"{HUB}/api/whoami-v2", token) if token else None
    readable = whoami is not None and whoami.status == 200
    return [checks.hf_token(model, whoami, answers.get(f"{HUB}/{quote(model)}/resolve/main/config.json", token)
                            if readable and model else None, where) for model in hub_models(config) or [""]]


def all_findings(answers, config: StackConfig) -> list[Finding]:
    found, token = tool_findings(answers, config)
    found += api_findings(answers, config, token)
    found += quota_findings(answers, config, token)
    found += reservation_findings(answers, config, token)
    found += bucket_findings(answers, config, token)
    found += hub_findings(answers, config)
    return found
