"""The control plane by hand: `make e2e-up STACK=<name>`, `make e2e-env`, `make e2e-down`.

    python -m e2e.harness up --stack dev [--lifetime 3600] [--no-admission]
    python -m e2e.harness env      # shell exports: PATH with the built tools, KUBECONFIG
    python -m e2e.harness down     # stop everything `up` started

`up` leaves the control plane, the stack's nodes, the controllers and the
stack's objects running in the background (state in $E2E_STATE, default
/tmp/gke-finetune-e2e-<uid>), bounded by --lifetime: the watchdog stops it
all then, if `down` hasn't.
"""

from __future__ import annotations

import argparse
import sys

from e2e.harness.install import install_stack
from e2e.harness.observe import admissions, placements, report_lines
from e2e.harness.session import DEFAULT_STATE, control_plane, stop
from e2e.harness.stack_objects import stack_objects
from e2e.harness.tools import tools


def env_lines() -> list[str]:
    kubeconfig = DEFAULT_STATE / "kubeconfig"
    if not kubeconfig.exists():
        raise SystemExit(f"e2e: no control plane is up ({kubeconfig} is missing): run make e2e-up STACK=<name>")
    path = ":".join(tools().path_entries)
    return [f"export KUBECONFIG={kubeconfig}", f'export PATH="{path}:$PATH"']


def up(stack: str, lifetime: int, admission: bool) -> int:
    objects = stack_objects(stack, admission=admission)
    with control_plane(DEFAULT_STATE, lifetime, keep=True) as cp:
        kube = cp.client()
        installed = install_stack(cp, kube, objects)
        ns = objects.runs_namespace
        for line in report_lines(stack, installed.applied, installed.left_out, installed.jobs_completed,
                                 placements(kube, ns), admissions(kube, ns)):
            print(line)
        print(f"\ncontrol plane up at {cp.server} for {lifetime}s (state and logs in {cp.state}).")
        print("Reach it with:\n  eval \"$(make -s e2e-env)\"\n  kubectl get nodes,pods -A")
        print("Stop it with: make e2e-down")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the control plane with a stack's objects, and leave it running")
    p_up.add_argument("--stack", required=True, help="Pulumi.<stack>.yaml of the repository root")
    p_up.add_argument("--lifetime", type=int, default=3600, help="seconds before the watchdog stops it all")
    p_up.add_argument("--no-admission", action="store_true", help="skip admission/: the control plane judges alone")
    sub.add_parser("env", help="print the shell exports to reach the control plane")
    sub.add_parser("down", help="stop the control plane")
    args = parser.parse_args(argv)
    if args.command == "up":
        return up(args.stack, args.lifetime, not args.no_admission)
    if args.command == "env":
        print("\n".join(env_lines()))
        return 0
    stopped = stop(DEFAULT_STATE)
    print(f"e2e: stopped {', '.join(stopped) or 'nothing (no control plane was up)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
