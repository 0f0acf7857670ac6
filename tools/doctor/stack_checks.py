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
import shutil
import tempfile
from pathlib import Path
from urllib.parse import quote

from stack.apis import required_apis
from stack.config import StackConfig
from stack.images import trainers_to_build
from stack.rules import PLACEHOLDER_PROJECT
from admission.google_api import permissions as requests_table
from tools.doctor import checks, quotas, token_secret
from tools.doctor.bucket import bucket_findings
from tools.doctor.cluster_checks import cluster_findings
from tools.doctor.permissions import member, permission_findings
from tools.doctor.checks import COMPUTE, HUB, SERVICE_USAGE, Finding

PROGRAM = Path(__file__).resolve().parents[2]
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
                                       enabled, existing=config.existing is not None)
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
    needs = [quotas.Need(what, quota_id, dims, chips)
             for (quota_id, dims), (what, chips) in sorted(needed_quota(config).items())]
    return quotas.quota_findings(answers, config.project, config.region, needs, token)


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


def hub_findings(answers, config: StackConfig, token: str = "") -> list[Finding]:
    """The token: $HF_TOKEN, else the stack's Secret Manager secret; valid, and allowed to read the gated models."""
    if not config.reads_hub:
        return [Finding("Hugging Face token", checks.SKIP, "no run or dataset reads the Hub with it")]
    name = f"Hugging Face {(hub_models(config) or [''])[0] or 'token'}"
    hf, where = os.environ.get("HF_TOKEN", ""), "HF_TOKEN"
    if not hf:
        if not token:
            return [checks.hf_token(model, None, None, f"HF_TOKEN unset; {config.hf_token_version} not read without "
                                    "credentials") for model in hub_models(config) or [""]]
        got = answers.get(token_secret.access_url(config.hf_token_version), token)
        token_secret.hide_payload(answers, got)
        hf, problem = token_secret.token_from(got, config.hf_token_version, name)
        if problem is not None:
            return [problem]
        where = config.hf_token_version
    if hasattr(answers, "hide"):
        answers.hide(hf)
    whoami = answers.get(f"{HUB}/api/whoami-v2", hf)
    readable = whoami.status == 200
    return [checks.hf_token(model, whoami, answers.get(f"{HUB}/{quote(model)}/resolve/main/config.json", hf)
                            if readable and model else None, where) for model in hub_models(config) or [""]]


def stack_requests(config: StackConfig, root: Path | None) -> list[str] | None:
    """The Google API requests the stack's `pulumi up` makes, from what the program declares offline."""
    from tools.offline import run_stack  # pylint: disable=import-outside-toplevel (the program, under mocks)

    if root is None:
        return None
    with tempfile.TemporaryDirectory(prefix="doctor-plan-") as where:
        # The program beside this stack's files, wherever they are (--root).
        (Path(where) / "__main__.py").symlink_to(PROGRAM / "__main__.py")
        for name in ("Pulumi.yaml", f"Pulumi.{config.stack}.yaml"):
            shutil.copy(root / name, Path(where) / name)
        try:
            resources = run_stack(config.stack, root=Path(where)).resources
        except Exception:  # noqa: BLE001 (an invalid stack: `make plan` says why; this check is skipped)
            return None
    return requests_table.requests([(r.type, r.name, r.inputs) for r in resources])


def all_findings(answers, config: StackConfig, root: Path | None = None) -> list[Finding]:
    found, token = tool_findings(answers, config)
    found += api_findings(answers, config, token)
    if token:
        who = member(answers.run(COMMANDS["gcloud"]).stdout)
        found += permission_findings(answers, config.project, stack_requests(config, root), token, who)
    found += quota_findings(answers, config, token)
    found += reservation_findings(answers, config, token)
    found += bucket_findings(answers, config, token)
    found += hub_findings(answers, config, token)
    found += cluster_findings(answers, config, root or PROGRAM)
    return found
