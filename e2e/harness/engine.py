"""The program through the real Pulumi engine: the CLI, its Python language host and the Kubernetes provider.

The engine runs on a copy of the repository's tracked files (the program,
Pulumi.yaml and the layers it imports) with one stack file written there, so
a test can change the stack file without touching the clone. State is in a
local file backend under the work directory, secrets by passphrase; the
language host and the provider are found on PATH (e2e/README.md, "The
engine", says why these versions and why `PULUMI_PYTHON_CMD`). Nothing
reaches a network: the only cluster is the control plane on 127.0.0.1.

Each command is timed; `preview_steps` reads `pulumi preview --json`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from core.names import RUNS_NAMESPACE
from e2e.harness.tools import ROOT, Tools
from stack.contracts import node_pool_names

ENGINE_TOOLS = ("pulumi", "pulumi-language-python", "pulumi-kubernetes")
FAKE_DIGEST = "sha256:" + "e2" * 32
BUCKET = "e2e-existing-bucket"
PASSPHRASE = "e2e-local-only"
PROJECT_ID = "gke-finetune-e2e"  # no Google Cloud project is reached: an existing cluster's stack declares none
COMMAND_TIMEOUT = 600.0


class EngineError(RuntimeError):
    pass


def _pinned_sdk() -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith("pulumi-kubernetes=="):
            return line.split("==", 1)[1].strip()
    raise EngineError("e2e: requirements.txt pins no pulumi-kubernetes")


def _built_provider() -> str:
    recipe = (ROOT / "e2e" / "tools" / "pulumi-kubernetes" / "recipe").read_text()
    return next(line.split('"')[1] for line in recipe.splitlines() if line.startswith("PROVIDER_VERSION="))


def e2e_provider_note() -> str:
    """Which Kubernetes provider the engine runs here, against the one users get (e2e/README.md)."""
    shipped, built = _pinned_sdk(), _built_provider()
    if shipped == built:
        return f"e2e: the Kubernetes provider {built} is the one requirements.txt ships"
    return (f"e2e: the program's SDK is the shipped pulumi-kubernetes {shipped}; the engine runs it with the provider "
            f"{built}, the newest the Go module proxy serves. The objects, the API server's validation and the "
            f"controllers are the same; what this run can't show is {shipped}'s create, which refuses to adopt an "
            f"object that exists already (from 4.29.0; {built} creates with server-side apply).")


@dataclass(frozen=True)
class Step:
    command: str
    seconds: float
    output: str  # stdout and stderr
    stdout: str
    returncode: int = 0


@dataclass
class Engine:
    """One stack of the program in its own work directory, run through the real CLI."""

    workdir: Path
    stack: str
    env: dict[str, str]
    steps: list[Step] = field(default_factory=list)

    @property
    def stack_file(self) -> Path:
        return self.workdir / f"Pulumi.{self.stack}.yaml"

    def write_stack(self, config: dict) -> None:
        """The stack file's config replaced, its other keys (the passphrase's salt) kept. Written as
        JSON, which is YAML: every string stays quoted (PyYAML leaves `1e-5` bare, which the CLI's
        YAML 1.2 reads as a number)."""
        current = yaml.safe_load(self.stack_file.read_text()) if self.stack_file.exists() else {}
        self.stack_file.write_text(json.dumps({**(current or {}), "config": config}, indent=1))

    def read_stack(self) -> dict:
        return yaml.safe_load(self.stack_file.read_text())["config"]

    def set_secret(self, key: str, value: str) -> None:
        """A secret config value, encrypted with the passphrase (the CLI writes it and its salt)."""
        self.run("config", "set", "--secret", key, value)

    def run(self, *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT) -> Step:
        argv = ["pulumi", *args, "--stack", self.stack, "--non-interactive"]
        start = time.monotonic()
        done = subprocess.run(argv, cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=timeout)
        step = Step(" ".join(args), time.monotonic() - start, done.stdout + done.stderr, done.stdout,
                    done.returncode)
        self.steps.append(step)
        if check and done.returncode != 0:
            raise EngineError(f"e2e: `pulumi {' '.join(args)}` exited {done.returncode}:\n{step.output[-6000:]}")
        return step

    def preview_steps(self) -> list[dict]:
        """The steps `pulumi preview` plans: op (create, same, replace, ...), urn, type and name."""
        step = self.run("preview", "--json")
        # urn:pulumi:<stack>::<project>::<parent type>$<type>::<name>
        return [{"op": s["op"], "urn": s["urn"], "type": s["urn"].split("::")[-2].split("$")[-1],
                 "name": s["urn"].split("::")[-1]} for s in json.loads(step.stdout).get("steps", [])]


def existing_cluster_config(stack: str, kubeconfig: str, namespace: str = RUNS_NAMESPACE,
                            create_namespace: bool = True) -> dict:
    """The shipped stack file as a stack for an existing cluster: the same pools (named by the node
    pools the shipped stack would have made), runs and datasets; images by digest; the bucket named;
    its namespace (by default the shipped stack's, which the Kueue the harness installs for it manages,
    declared by the stack: the platform install makes none)."""
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return existing_cluster_values(config, kubeconfig, namespace, create_namespace)


def existing_cluster_values(config: dict, kubeconfig: str, namespace: str = RUNS_NAMESPACE,
                            create_namespace: bool = True) -> dict:
    """A platform stack's config values (the stack file's `config:`) as a stack for an existing cluster, in
    `namespace` (declared by the stack unless `create_namespace` is false)."""
    out = {k: v for k, v in config.items() if k.startswith("gcp:")}
    out["gcp:project"] = PROJECT_ID  # `pulumi up` refuses the shipped files' placeholder (stack/rules.py)
    prefix = "gke-finetune:"
    pools = []
    for pool in config.get(f"{prefix}pools", []):
        pool = dict(pool)
        names = list(node_pool_names(pool["name"], pool.get("slices", 1)))
        pool.update({"nodePools": names} if len(names) > 1 else {"nodePool": names[0]})
        pools.append(pool)
    # A run of one's own container (no trainer) names its image itself.
    trainers = {r["trainer"] for r in config.get(f"{prefix}runs", []) if r.get("trainer")}
    out.update({
        f"{prefix}existingCluster": {"context": "e2e", "kubeconfig": kubeconfig, "controllers": "existing"},
        f"{prefix}pools": pools,
        f"{prefix}images": {t: f"us-docker.pkg.dev/e2e/finetune/{t}@{FAKE_DIGEST}" for t in trainers},
        f"{prefix}bucketName": BUCKET,
        f"{prefix}namespace": namespace,
        f"{prefix}createNamespace": create_namespace,
    })
    for key in ("runs", "datasets"):
        if f"{prefix}{key}" in config:
            out[f"{prefix}{key}"] = config[f"{prefix}{key}"]
    return out


def copy_program(dest: Path) -> None:
    """The repository's tracked files, as a clean checkout has them (no stack files, no state)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, listed.stdout.split("\0")):
        src = ROOT / name
        if not src.is_file() or (name.startswith("Pulumi.") and name != "Pulumi.yaml"):
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


# The discard port: nothing of the harness listens there.
CLOSED_STORAGE = "http://127.0.0.1:9"


def engine_env(tools: Tools, workdir: Path, kubeconfig: Path) -> dict[str, str]:
    """What the CLI needs to run here: the built tools first on PATH, the local backend and its
    passphrase, the program's interpreter, the control plane's kubeconfig, no network."""
    return {
        "PATH": ":".join([*tools.path_entries, os.environ.get("PATH", "")]),
        "PULUMI_HOME": str(workdir / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{workdir / 'state'}", "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": str(ROOT / ".venv" / "bin" / "python"), "KUBECONFIG": str(kubeconfig),
        "PYTHONUNBUFFERED": "1",
        # The program reads the stack's bucket before it declares anything (components/bucket_preflight.py): here
        # a Cloud Storage address on 127.0.0.1 where nothing listens (never Google's API, never a metadata
        # server), so each read is "not checked"; e2e/tests/test_bucket_reads.py reads a real emulator.
        "STORAGE_EMULATOR_HOST": CLOSED_STORAGE,
    }


def engine(tools: Tools, workdir: Path, stack: str, kubeconfig: Path, extra_env: dict[str, str] | None = None) -> Engine:
    """A work directory with the program, a local backend and the stack initialised. `extra_env`: what
    a provider needs besides (the Docker engine's address and client configuration, docker_engine.py)."""
    missing = [t for t in ENGINE_TOOLS if t not in tools.dirs]
    if missing:
        raise EngineError(f"e2e: the engine's tools {missing} are not built: run make e2e-tools")
    copy_program(workdir / "program")
    (workdir / "state").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(workdir), **engine_env(tools, workdir, kubeconfig), **(extra_env or {})}
    made = Engine(workdir / "program", stack, env)
    made.run("stack", "init")
    return made
