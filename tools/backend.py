"""`make backend`: a team's shared Pulumi state backend in Cloud Storage, and whether a deployed stack uses one.

    python -m tools.backend setup --project P --location L [--bucket B] [--team MEMBER ...] [--apply]
    python -m tools.backend check [--url URL]          # exit 78 unless URL (default $PULUMI_BACKEND_URL) is gs://

A clone's default backend is a local directory (Pulumi.yaml `backend.url: file://.pulumi-state`): each
teammate and each CI runner would keep a state of its own, and a CI runner's is gone when the job ends, so
the next `up` would create every resource again. A team shares one `gs://` backend instead
(https://www.pulumi.com/docs/iac/concepts/state-and-backends/#google-cloud-storage): its own bucket, with
uniform bucket-level access (IAM only, no object ACLs), public access prevention, and object versioning
(every earlier state file is kept: a bad `up` can be undone by restoring one); the deploy identity may
read and write it (roles/storage.objectAdmin: the state and its lock), the preview identity only read it
(roles/storage.objectViewer: a preview takes no lock), and the team's members read and write it.

`setup` prints the gcloud commands (a dry run, the default) or, with `--apply` (`make backend APPLY=1`),
runs them one by one, stopping at the first that fails; then it prints how to point the CLI and the
workflows at the bucket and how to move a stack's state there. `check` is what the deploy workflows run
before `pulumi up`, and `deployed_from_local` what `make plan` warns with.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from core.syntax import PROJECT_ID
from tools.stacks import DEPLOYED_FILE, deployed

EX_CONFIG = 78
# A bucket name: 3-63 lowercase letters, digits, dashes, underscores and dots, starting and ending with a
# letter or digit (https://cloud.google.com/storage/docs/buckets#naming).
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
MEMBER = re.compile(r"(user|group|serviceAccount|domain):\S+")
ROOT = Path(__file__).resolve().parents[1]


def default_bucket(project: str) -> str:
    return f"{project}-pulumi-state"


def setup_commands(project: str, location: str, bucket: str, team: list[str]) -> list[list[str]]:
    """The gcloud commands that make the backend bucket and grant who may use it."""
    url = f"gs://{bucket}"
    grants = [(f"serviceAccount:pulumi-deploy@{project}.iam.gserviceaccount.com", "roles/storage.objectAdmin"),
              (f"serviceAccount:pulumi-preview@{project}.iam.gserviceaccount.com", "roles/storage.objectViewer"),
              *((member, "roles/storage.objectAdmin") for member in team)]
    return [
        ["gcloud", "storage", "buckets", "create", url, f"--project={project}", f"--location={location}",
         "--uniform-bucket-level-access", "--public-access-prevention"],
        ["gcloud", "storage", "buckets", "update", url, "--versioning"],
        *(["gcloud", "storage", "buckets", "add-iam-policy-binding", url, f"--member={member}", f"--role={role}"]
          for member, role in grants),
    ]


def next_steps(bucket: str) -> list[str]:
    return [
        f"Then point the CLI and CI at it: `pulumi login gs://{bucket}` (or PULUMI_BACKEND_URL=gs://{bucket}), and "
        f"the repository variable PULUMI_BACKEND_URL=gs://{bucket} (docs/ci.md).",
        "A stack whose state is still local moves with it: `pulumi stack export --stack <s> --file <s>.json` "
        f"on the old backend, then `pulumi login gs://{bucket} && pulumi stack init <s> && pulumi stack import "
        "--stack <s> --file <s>.json` (keep Pulumi.<s>.yaml's encryptionsalt and the same passphrase).",
    ]


def problems(project: str, location: str, bucket: str, team: list[str]) -> list[str]:
    found = []
    if not PROJECT_ID.match(project):
        found.append(f"--project: {project!r} is not a project id; allowed: 6-30 lowercase letters, digits or "
                     "hyphens, starting with a letter")
    if not re.fullmatch(r"[A-Za-z0-9-]+", location):
        found.append(f"--location: {location!r} is not a Cloud Storage location; allowed: a region (us-central1), "
                     "a dual-region or a multi-region (US, EU)")
    if not BUCKET.fullmatch(bucket) or ".." in bucket or bucket.startswith("goog"):
        found.append(f"--bucket: {bucket!r} is not a bucket name; allowed: 3-63 lowercase letters, digits, '-', "
                     "'_', '.', starting and ending with a letter or digit")
    found += [f"--team: {m!r} is not an IAM member; allowed: user:<email>, group:<email>, "
              "serviceAccount:<email>, domain:<domain>" for m in team if not MEMBER.fullmatch(m)]
    return found


def local_backend_problem(url: str) -> str | None:
    """Why a deploy must not use `url` as its state backend (None: a shared backend)."""
    if not url:
        return ("PULUMI_BACKEND_URL: '' is not set, so pulumi would keep this runner's own state, gone when the "
                "job ends; allowed: the team's gs:// backend (`make backend`, then the repository variable "
                "PULUMI_BACKEND_URL)")
    if url.startswith(("file://", "/", ".")) or "://" not in url:
        return (f"PULUMI_BACKEND_URL: {url!r} is a local directory: each runner's state is its own and is gone when "
                "the job ends, so the next `pulumi up` would create everything again; allowed: the team's gs:// "
                "backend (`make backend`)")
    return None


def project_backend(root: Path) -> str:
    """The backend this checkout's CLI uses: $PULUMI_BACKEND_URL, else Pulumi.yaml's `backend.url`."""
    import yaml  # pylint: disable=import-outside-toplevel

    if os.environ.get("PULUMI_BACKEND_URL"):
        return os.environ["PULUMI_BACKEND_URL"]
    project = yaml.safe_load((root / "Pulumi.yaml").read_text()) or {}
    return str((project.get("backend") or {}).get("url", ""))


def deployed_from_local(stack: str, root: Path = ROOT) -> str | None:
    """The warning `make plan` prints when CI deploys `stack` (deploy/stacks.txt) while this checkout's backend
    is local: CI, which must use the team's backend, and this machine then hold two different states."""
    try:
        by_ci = stack in deployed(root)
    except SystemExit:  # a listed stack without its file: tools/stacks.py says so where it matters
        by_ci = False
    url = project_backend(root)
    if not by_ci or local_backend_problem(url) is None:
        return None
    return (f"warning: stack {stack} is deployed by .github/workflows/deploy.yml ({DEPLOYED_FILE}), and this "
            f"checkout's state backend is {url!r}, a local directory: CI and this machine hold two different states; "
            "use the team's gs:// backend here too (`make backend`, then `pulumi login gs://<bucket>`)")


def _setup(args: argparse.Namespace) -> int:
    bucket = args.bucket or default_bucket(args.project)
    found = problems(args.project, args.location, bucket, args.team)
    if found:
        print("\n".join(f"backend: {p}" for p in found), file=sys.stderr)
        return EX_CONFIG
    commands = setup_commands(args.project, args.location, bucket, args.team)
    print(f"The team's state backend gs://{bucket} ({'running' if args.apply else 'dry run: APPLY=1 runs'} these):")
    for argv in commands:
        print("  " + shlex.join(argv))
        if args.apply:
            done = subprocess.run(argv, check=False)
            if done.returncode != 0:
                print(f"backend: `{shlex.join(argv)}` exited {done.returncode}; nothing after it was run",
                      file=sys.stderr)
                return done.returncode
    print("\n".join(next_steps(bucket)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.backend", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="the gcloud commands of the team's gs:// backend (run with --apply)")
    setup.add_argument("--project", required=True)
    setup.add_argument("--location", required=True, help="the bucket's location, e.g. the stacks' region")
    setup.add_argument("--bucket", default="", help="default: <project>-pulumi-state")
    setup.add_argument("--team", action="append", default=[], metavar="MEMBER",
                       help="an IAM member who deploys from a workstation too (user:, group:); repeatable")
    setup.add_argument("--apply", action="store_true", help="run the commands instead of printing them")
    check = sub.add_parser("check", help="exit 78 unless the state backend is shared (gs://)")
    check.add_argument("--url", default=None, help="default: $PULUMI_BACKEND_URL")
    args = parser.parse_args(argv)
    if args.command == "setup":
        return _setup(args)
    problem = local_backend_problem(os.environ.get("PULUMI_BACKEND_URL", "") if args.url is None else args.url)
    if problem:
        print(f"backend: {problem}", file=sys.stderr)
        return EX_CONFIG
    print("backend: a shared state backend")
    return 0


if __name__ == "__main__":
    sys.exit(main())
