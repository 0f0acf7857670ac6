"""The control plane by hand: `make e2e-up STACK=<name>`, `make e2e-env`, `make e2e-down`.

    python -m e2e.harness up --stack dev [--lifetime 3600] [--no-admission]
    python -m e2e.harness env      # shell exports: PATH with the built tools, KUBECONFIG
    python -m e2e.harness down     # stop everything `up` started

`up` leaves the control plane, the stack's nodes, the controllers and the
stack's objects running in the background (state in $E2E_STATE, default
/tmp/gke-finetune-e2e-<uid>), bounded by --lifetime: the watchdog stops it
all then, if `down` hasn't. A Standard stack is deployed through the real
Pulumi CLI, as a stack for an existing cluster (e2e/harness/engine.py), with
its state in a local backend there: `env` exports what `pulumi preview`,
`up`, `stack output` and `destroy` need by hand. `--no-engine` (and an
Autopilot stack) applies the objects the program declares directly.
"""

from __future__ import annotations

import argparse
import sys

from e2e.harness.engine import engine, engine_env, existing_cluster_config
from e2e.harness.install import install_stack
from e2e.harness.observe import admissions, placements, report_lines
from e2e.harness.session import DEFAULT_STATE, control_plane, stop
from e2e.harness.stack_objects import stack_objects
from e2e.harness.tools import tools


ENGINE_DIR = DEFAULT_STATE / "pulumi"


def env_lines() -> list[str]:
    kubeconfig = DEFAULT_STATE / "kubeconfig"
    if not kubeconfig.exists():
        raise SystemExit(f"e2e: no control plane is up ({kubeconfig} is missing): run make e2e-up STACK=<name>")
    path = ":".join(tools().path_entries)
    lines = [f"export KUBECONFIG={kubeconfig}", f'export PATH="{path}:$PATH"']
    if (ENGINE_DIR / "program").is_dir():
        env = engine_env(tools(), ENGINE_DIR, kubeconfig)
        lines += [f"export {k}={env[k]}" for k in sorted(env) if k.startswith("PULUMI_")]
        lines.append(f"cd {ENGINE_DIR / 'program'}")
    return lines


def _through_engine(cp, stack: str) -> str:
    """The stack deployed as an existing-cluster stack by `pulumi up`; returns its Pulumi stack name."""
    made = engine(cp.tools, ENGINE_DIR, f"existing-{stack}", cp.kubeconfig)
    made.write_stack(existing_cluster_config(stack, str(cp.kubeconfig)))
    made.run("up", "--yes", "--skip-preview")
    return made.stack


def up(stack: str, lifetime: int, admission: bool, through_engine: bool = True) -> int:
    objects = stack_objects(stack, admission=admission)
    through_engine = through_engine and not objects.autopilot and admission
    with control_plane(DEFAULT_STATE, lifetime, keep=True) as cp:
        kube = cp.client()
        installed = install_stack(cp, kube, objects, platform_only=through_engine)
        if through_engine:
            print(f"deployed by `pulumi up` as stack {_through_engine(cp, stack)} (state in {ENGINE_DIR / 'state'})")
        ns = objects.runs_namespace
        for line in report_lines(stack, installed.applied, installed.left_out, installed.jobs_completed,
                                 placements(kube, ns), admissions(kube, ns)):
            print(line)
        print(f"\ncontrol plane up at {cp.server} for {lifetime}s (state and logs in {cp.state}).")
        print("Reach it with:\n  eval \"$(make -s e2e-env)\"\n  kubectl get nodes,pods -A")
        if through_engine:
            print("  pulumi preview --diff; pulumi stack output; pulumi destroy   (after the eval, in that directory)")
        print("Stop it with: make e2e-down")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the control plane with a stack's objects, and leave it running")
    p_up.add_argument("--stack", required=True, help="Pulumi.<stack>.yaml of the repository root")
    p_up.add_argument("--lifetime", type=int, default=3600, help="seconds before the watchdog stops it all")
    p_up.add_argument("--no-admission", action="store_true", help="skip admission/: the control plane judges alone")
    p_up.add_argument("--no-engine", action="store_true", help="apply the declared objects instead of `pulumi up`")
    sub.add_parser("env", help="print the shell exports to reach the control plane")
    sub.add_parser("down", help="stop the control plane")
    args = parser.parse_args(argv)
    if args.command == "up":
        return up(args.stack, args.lifetime, not args.no_admission, not args.no_engine)
    if args.command == "env":
        print("\n".join(env_lines()))
        return 0
    stopped = stop(DEFAULT_STATE)
    print(f"e2e: stopped {', '.join(stopped) or 'nothing (no control plane was up)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
