"""The offline plan: what `pulumi up` would declare for a stack, with no CLI and no credentials.

    make plan STACK=dev                      # python -m tools.plan show --stack dev
    make plan-diff BASE=origin/main STACK=dev  # python -m tools.plan diff --base origin/main --stack dev

`show` runs the real program (__main__.py) for Pulumi.<stack>.yaml under the
SDK's mocks (tools/offline.py, the engine the tests use) and prints every
resource it declares as a tree (type, name, key inputs), secrets masked; then,
per accelerator pool and run, chips, VMs, slices and the on-demand list price
from the catalog with its date, and a total; and writes the run manifests
(the dicts the program applies, rendered by tools/render.py) under
plan/<stack>/manifests/. A stack that fails validation prints the problems
and exits 1.

`diff` plans the stack in this tree and in another git ref (checked out with
`git worktree add` into a temporary directory, planned by this file against
that tree's program and stack files) and prints what the change adds, removes
and modifies, input by input: the offline counterpart of `pulumi preview --diff`.

This module collects the plan and runs the command line; the resource tree,
the cost table and the diff are in tools/plan_tree.py, tools/plan_cost.py and
tools/plan_diff.py.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    # Run as a file (`plan_json` plans another tree that way): this tree's
    # `tools` package must be importable before `_use_root` switches trees.
    sys.path.insert(0, str(ROOT))

from tools.plan_cost import cost, render_cost, render_fit  # noqa: E402
from tools.plan_diff import diff, render_diff  # noqa: E402
from tools.plan_google import GoogleApiProblems, google_requests, render_google  # noqa: E402
from tools.plan_hbm import hbm_rows, render_hbm  # noqa: E402
from tools.plan_memory import memory_rows, render_memory  # noqa: E402
from tools.plan_tree import key_inputs, render_tree, short  # noqa: E402,F401 (key_inputs: part of the plan API)
from tools.render import write_manifests as render_files  # noqa: E402
from tools.stacks import stack_files  # noqa: E402

SECRET = "[secret]"
# The wire form of a Pulumi secret value (pulumi.runtime.rpc's secret signature).
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
# Stand-in for secret config values; never printed (masked wherever it appears).
_SECRET_PLACEHOLDER = "offline-plan-secret-value"
_STACK_TYPE = "pulumi:pulumi:Stack"
# tools.offline.SECURE_STAND_IN, the stand-in of a stack file's `secure:` value (masked too).
_SECURE_STAND_IN = "offline-stand-in-for-an-encrypted-value"


class PlanError(Exception):
    """The stack could not be planned; `problems` holds one line each. `unreadable`: its file isn't a
    stack file at all (a YAML error), said in the one line `<file>:<line>:<column>: <what>`."""

    def __init__(self, problems: list[str], unreadable: bool = False):
        self.problems = problems
        self.unreadable = unreadable
        super().__init__("\n".join(problems))


# --- collecting -------------------------------------------------------------------------


def mask(value: Any, secrets: tuple[str, ...] = (_SECRET_PLACEHOLDER, _SECURE_STAND_IN)) -> Any:
    """`value` with secret values (wire-marked or equal to a secret) replaced by [secret]."""
    if isinstance(value, Mapping):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return SECRET
        return {k: mask(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask(v, secrets) for v in value]
    if isinstance(value, str) and any(s and s in value for s in secrets):
        return SECRET
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire form turns every number into a float
    return value


def collect(stack: str, root: Path = ROOT, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan `stack` of the tree at `root` as JSON-ready data (secrets already masked).

    The stack has the secrets its file holds (`secure:` values) and those
    named in `secrets` (keys of the project, e.g. "hfToken"), as a deployment
    that sets them (`pulumi config set --secret`, or a workflow from a
    repository secret) would; a stand-in value is planned for each.

    The project's modules are imported from `root`, so `root` must be first on
    sys.path and no project module may be imported yet (`main` sees to it).
    """
    from tools import offline, stacks

    if not (root / f"Pulumi.{stack}.yaml").is_file():
        raise PlanError([f"no stack file Pulumi.{stack}.yaml; stacks: {list(stacks.stack_files(root))}"])
    # The planned tree's own modules (`root` is first on sys.path).
    manifests_module = importlib.import_module("manifests.run")
    reader = importlib.import_module("stack.reader")
    problems = importlib.import_module("stack.problems")
    fit_module = importlib.import_module("admission.check")

    manifests: dict[str, dict] = {}
    real_build_run = getattr(manifests_module, "build_run", None)

    def build_run(*args, **kwargs):
        manifest = real_build_run(*args, **kwargs)
        manifests[manifest["metadata"]["name"]] = manifest
        return manifest

    given = {f"{offline.PROJECT}:{key}": _SECRET_PLACEHOLDER for key in secrets}
    with ExitStack() as patches:
        if real_build_run is not None:
            patches.enter_context(mock.patch.object(manifests_module, "build_run", build_run))
        try:
            deployment = offline.run_stack(stack, secrets=given, root=root)
        except problems.ConfigError as err:
            unreadable = type(err).__name__ == "StackFileError"  # a tree's own class (an older one has none)
            raise PlanError(list(err.problems), unreadable) from None
        except Exception as err:  # noqa: BLE001 (any validation error of the program)
            raise PlanError([f"{type(err).__name__}: {err}"]) from None

    # What each Google Cloud resource would send to Google, judged by Google's API definitions
    # before anything is declared for real (admission/google_api).
    try:
        google = google_requests(deployment)
    except GoogleApiProblems as err:
        raise PlanError(err.problems) from None
    config = reader.load_files(stack, root)
    collisions = _collisions(stack, config, root, reader)
    if collisions:
        raise PlanError(collisions)
    declared = manifests or _declared_manifests(deployment)
    return {
        "stack": stack,
        "resources": [_resource_row(r) for r in deployment.resources],
        "outputs": mask(deployment.outputs),
        "cost": cost(config),
        "fit": fit_module.fit_table(config),
        "hbm": hbm_rows(stack, declared),
        "model_memory": memory_rows(config, declared),
        "manifests": mask(declared),
        "kueue": _kueue_objects(config),
        "access": _access(config, deployment),
        "google": google,
    }


def _collisions(stack: str, config, root: Path, reader) -> list[str]:
    """The names `stack` would claim that another stack file of the tree claims too (stack/global_names.py);
    a stack file that doesn't load is left to its own plan."""
    try:
        names = importlib.import_module("stack.global_names")
    except ImportError:  # a tree from before the check
        return []
    configs = {stack: config}
    for other in stack_files(root):
        if other != stack:
            try:
                configs[other] = reader.load_files(other, root)
            except Exception:  # noqa: BLE001 (any problem of that file: its own plan reports it)
                continue
    return names.collision_problems(stack, configs)


def _access(config, deployment) -> list[str]:
    """What can reach the control plane, and what the control plane may reach on the nodes."""
    network, existing = getattr(config, "network", None), getattr(config, "existing", None)
    if existing is not None:
        named = f"context {existing.context}" if existing.context else f"{existing.name} in {existing.location}"
        lines = [f"control plane: an existing cluster's ({named}), as the platform team set it up"]
    elif hasattr(network, "control_plane_access"):
        lines = [f"control plane: {network.control_plane_access()}"]
    else:
        lines = []
    for rule in (r for r in deployment.resources if r.type == "gcp:compute/firewall:Firewall"):
        ports = ", ".join(f"{a['protocol']}:{p}" for a in rule.inputs.get("allows", []) for p in a.get("ports", []))
        lines.append(f"firewall {rule.inputs.get('name')}: the control plane to nodes tagged "
                     f"{', '.join(rule.inputs.get('targetTags', []))} on {ports} (the controllers' webhooks)")
    return lines


def _kueue_objects(config) -> dict[str, dict]:
    """The planned tree's Kueue objects (none in a tree without Kueue, or a stack that needs none)."""
    try:
        builder = importlib.import_module("manifests.kueue")
    except ImportError:
        return {}
    flavors = config.kueue_flavors() if hasattr(config, "kueue_flavors") else []
    return builder.kueue_manifests(flavors)


def _resource_row(r) -> dict[str, Any]:
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "parent": "" if _is_stack(r.parent) else r.parent,
        "protect": r.protect,
        "retainOnDelete": r.retain_on_delete,
        "replaceOnChanges": list(r.replace_on_changes),
        "inputs": mask(r.inputs),
    }


def _is_stack(urn: str) -> bool:
    """Whether a parent URN is the stack itself (urn:pulumi:<stack>::<project>::<type>::<name>)."""
    parts = urn.split("::")
    return len(parts) < 3 or parts[2] == _STACK_TYPE


def _declared_manifests(deployment) -> dict[str, dict]:
    """Job/JobSet inputs as declared, for a program whose builders could not be captured."""
    kinds = ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:batch/v1:Job")
    return {
        r.inputs.get("metadata", {}).get("name", r.name): r.inputs
        for r in deployment.resources
        if r.type in kinds
    }


# --- showing ----------------------------------------------------------------------------


def render(plan: Mapping) -> str:
    n = len(plan["resources"])
    lines = [f"Stack {plan['stack']}: {n} resources `pulumi up` would declare (offline, mocks engine)", ""]
    lines += render_tree(plan)
    if plan.get("access"):
        lines += ["", "Access"] + [f"  {line}" for line in plan["access"]]
    lines += ["", "Google Cloud requests, each judged by Google's definition of its API method"]
    lines += render_google(plan.get("google", []))
    lines += ["", "Accelerators ($/hour at each pool's capacity)"]
    lines += render_cost(plan["cost"])
    lines += ["", "Fit: each run's pod (FUSE sidecar and memory-backed volumes included) on one node"]
    lines += render_fit(plan.get("fit", []))
    lines += ["", "Accelerator memory: each TPU run's train step on its slice, per chip"]
    lines += render_hbm(plan.get("hbm", []))
    lines += ["", "Model memory: each run's model on its pool's chips (what admission refuses a run on)"]
    lines += render_memory(plan.get("model_memory", []))
    if plan["outputs"]:
        lines += ["", "Stack outputs"]
        for k, v in plan["outputs"].items():
            lines.append(f"  {k}: {short(v) if not isinstance(v, str) else v}")
    return "\n".join(lines)


def write_manifests(plan: Mapping, out_dir: Path) -> list[Path]:
    """The run manifests in `out_dir`, and the Kueue objects in `out_dir`/kueue/ (removed when none)."""
    written = render_files(plan["manifests"], out_dir)
    kueue_dir = out_dir / "kueue"
    if plan.get("kueue") or kueue_dir.is_dir():
        written += render_files(plan.get("kueue", {}), kueue_dir)
    if kueue_dir.is_dir() and not any(kueue_dir.iterdir()):
        kueue_dir.rmdir()
    return written


# --- another git ref --------------------------------------------------------------------


def plan_json(stack: str, root: Path, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan another tree with that tree's own plan tool, in a fresh interpreter.

    Each tree plans itself with its own code (its modules must not mix with
    this tree's, and an older tree may be laid out differently); the plan's
    JSON is the interface between the two.
    """
    tool = root / "tools" / "plan.py"
    if not tool.is_file():
        raise PlanError([f"{root} has no tools/plan.py to plan it with"])
    command = [sys.executable, str(tool), "json", "--stack", stack, "--root", str(root)]
    flags = [word for key in secrets for word in ("--secret", key)]
    proc = subprocess.run(command + flags, capture_output=True, text=True, cwd=str(root))  # as the CLI
    if flags and proc.returncode == 2 and "unrecognized arguments: --secret" in proc.stderr:
        # A tree whose plan tool predates --secret gave every stack its secrets itself.
        proc = subprocess.run(command, capture_output=True, text=True, cwd=str(root))
    if proc.returncode != 0:
        raise PlanError([f"planning {root} failed:", proc.stderr.strip()[-2000:]])
    return json.loads(proc.stdout)


def plan_ref(stack: str, ref: str, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """Plan `stack` as it is at git `ref`, from a temporary worktree."""
    with tempfile.TemporaryDirectory(prefix="plan-base-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), ref],
                       check=True, capture_output=True, text=True)
        try:
            return plan_json(stack, tree, secrets)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, text=True)


# --- command line -----------------------------------------------------------------------


def _use_root(root: Path) -> None:
    """Make `root`'s project modules the ones imported (this tree's tools stay loaded)."""
    sys.path.insert(0, str(ROOT))
    import tools.offline  # noqa: F401,PLC0415 (loaded from this tree before the switch)

    sys.path[:] = [str(root)] + [
        p for p in sys.path if Path(p or ".").resolve() not in (ROOT, ROOT / "tools")
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    secret = {"action": "append", "default": [], "metavar": "KEY",
              "help": "plan as if this secret key were set (e.g. hfToken); repeatable"}
    show = sub.add_parser("show", help="print the plan of a stack and write its run manifests")
    show.add_argument("--stack", required=True)
    show.add_argument("--secret", **secret)
    show.add_argument("--out", type=Path, help="manifests directory (default: plan/<stack>/manifests)")
    show.add_argument("--json", type=Path, help="also write the plan as JSON here")
    js = sub.add_parser("json", help="print the plan as JSON (for diff)")
    js.add_argument("--stack", required=True)
    js.add_argument("--root", type=Path, default=ROOT)
    js.add_argument("--secret", **secret)
    df = sub.add_parser("diff", help="what a change adds, removes and modifies against a git ref")
    df.add_argument("--stack", required=True)
    df.add_argument("--base", required=True, help="git ref to compare with, e.g. origin/main")
    df.add_argument("--secret", **secret)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = args.root.resolve() if args.command == "json" else ROOT
    _use_root(root)
    os.chdir(root)  # the CLI runs the program in the project directory
    if args.command == "json":
        try:
            print(json.dumps(collect(args.stack, root, tuple(args.secret)), sort_keys=True))
        except PlanError as err:  # an invalid stack is a result, not a failure of the tool
            print(json.dumps({"stack": args.stack, "errors": err.problems}))
        return 0
    if args.command == "show":
        return _show(args)
    return _diff(args)


def unset_secrets(stack: str, root: Path, given: tuple[str, ...]) -> tuple[str, ...]:
    """The secret keys the stack needs but neither holds (`secure:` in its file) nor was given (--secret):
    planned as set, as `pulumi preview` plans them (stack/reader.py `hf_token_planned_only`)."""
    reader = importlib.import_module("stack.reader")
    secrets = importlib.import_module("stack.secrets")
    try:
        config = reader.load_files(stack, root)
        project = importlib.import_module("core.names").PROJECT
        held = reader.file_values(stack, root).get(f"{project}:{secrets.HF_TOKEN_KEY}")
    except Exception:  # noqa: BLE001 (an invalid stack: collect says what is wrong with it)
        return ()
    needed = secrets.needs_hf_token(config.runs, config.datasets)
    if not needed or secrets.HF_TOKEN_KEY in given or (isinstance(held, dict) and "secure" in held):
        return ()
    return (secrets.HF_TOKEN_KEY,)


def _show(args: argparse.Namespace) -> int:
    planned_as_set = unset_secrets(args.stack, ROOT, tuple(args.secret))
    for key in planned_as_set:
        print(f"{key}: not set; planned as set, as `pulumi preview` plans it (`pulumi up` needs it: "
              f"pulumi config set --secret {key} <value>)\n")
    try:
        plan = collect(args.stack, ROOT, tuple(args.secret) + planned_as_set)
    except PlanError as err:
        if err.unreadable:
            print(f"{err.problems[0]} (stack {args.stack}: nothing planned)", file=sys.stderr)
            return 1
        print(f"Stack {args.stack} is invalid; nothing would be declared:", file=sys.stderr)
        for problem in err.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(render(plan))
    out = (args.out or ROOT / "plan" / args.stack / "manifests").resolve()
    written = write_manifests(plan, out)
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"\nRun manifests ({len(written)}) written to {shown}/")
    if args.json:
        args.json.write_text(json.dumps(plan, indent=2, sort_keys=True))
    return 0


def _diff(args: argparse.Namespace) -> int:
    head = plan_json(args.stack, ROOT, tuple(args.secret))
    base = plan_ref(args.stack, args.base, tuple(args.secret))
    for label, result in ((args.base, base), ("working tree", head)):
        if result.get("errors"):
            print(f"Stack {args.stack} at {label} is invalid:")
            print("\n".join(f"  - {p}" for p in result["errors"]))
            if result is head:
                return 1
    print(render_diff(diff(None if base.get("errors") else base, head), args.stack, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
