"""The workflows' guard: is a GitHub environment protected as docs/ci.md says, before a job asks for its secret?

    python -m tools.ci environment preview --reviewers     # the pull requests' previews: required reviewers
    python -m tools.ci environment dev --main-only          # a deployed stack's: deployments from main only
    python -m tools.ci environment preview --reviewers --answer environment.json   # judge a recorded answer

It reads GitHub's REST API, GET /repos/{owner}/{repo}/environments/{name}
(https://docs.github.com/en/rest/deployments/environments#get-an-environment; the job's GITHUB_TOKEN with
`actions: read`), and exits 78 with one line naming the setting, its value and the fix when:
- `--reviewers`: no `required_reviewers` protection rule with a reviewer, or one that lets the author of
  a run approve it (`prevent_self_review` false): a pull request's code would run with the environment's
  secret without another person's approval;
- `--main-only`: `deployment_branch_policy` is null (every branch may deploy).
GitHub enforces an environment's protection on any job that names the environment, whatever the workflow
file says; this check catches a repository where the protection is missing. It needs no secret and holds
none. Standard library only: it runs before any environment is set up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

EX_CONFIG = 78
API_VERSION = "2022-11-28"


def _where(name: str) -> str:
    return f"Settings → Environments → {name}"


def reviewer_problem(name: str, environment: dict) -> str | None:
    rules = environment.get("protection_rules") or []
    reviewing = [r for r in rules if isinstance(r, dict) and r.get("type") == "required_reviewers"]
    if not reviewing or not any(r.get("reviewers") for r in reviewing):
        kinds = sorted({str(r.get("type")) for r in rules if isinstance(r, dict)})
        return (f"environment {name!r}: protection_rules {kinds or '[]'} has no required_reviewers rule with a "
                f"reviewer, so a pull request's code would run with its secret unapproved; fix: {_where(name)} → "
                "Required reviewers: add the people who approve previews (and Prevent self-review)")
    if not all(r.get("prevent_self_review") for r in reviewing):
        return (f"environment {name!r}: required_reviewers.prevent_self_review is false, so a pull request's "
                f"author may approve its own preview; fix: {_where(name)} → Prevent self-review")
    return None


def branch_problem(name: str, environment: dict) -> str | None:
    if environment.get("deployment_branch_policy") is None:
        return (f"environment {name!r}: deployment_branch_policy is null, so any branch may deploy with its "
                f"secrets; fix: {_where(name)} → Deployment branches and tags: Selected branches, `main`")
    return None


def fetch(name: str) -> tuple[int, dict]:
    """(HTTP status, body) of GET /repos/{GITHUB_REPOSITORY}/environments/{name}."""
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    url = f"{api}/repos/{os.environ['GITHUB_REPOSITORY']}/environments/{urllib.parse.quote(name, safe='')}"
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
        **({"Authorization": f"Bearer {os.environ['GH_TOKEN']}"} if os.environ.get("GH_TOKEN") else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (GitHub's API)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, {}


def judge(name: str, status: int, environment: dict, reviewers: bool, main_only: bool) -> str | None:
    if status == 404:
        return (f"environment {name!r}: does not exist (HTTP 404); fix: create it ({_where(name)}) with the "
                "protection docs/ci.md describes")
    if status != 200:
        return f"environment {name!r}: GitHub answered HTTP {status}; fix: give the job `permissions: actions: read`"
    return (reviewers and reviewer_problem(name, environment)) or (main_only and branch_problem(name, environment)) \
        or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.ci", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("environment", help="is a GitHub environment protected (exit 78 if not)")
    env.add_argument("name")
    env.add_argument("--reviewers", action="store_true", help="required reviewers, self-review prevented")
    env.add_argument("--main-only", action="store_true", help="a deployment branch policy")
    env.add_argument("--answer", type=Path, help="judge this recorded answer instead of asking GitHub")
    args = parser.parse_args(argv)
    status, body = (200, json.loads(args.answer.read_text())) if args.answer else fetch(args.name)
    problem = judge(args.name, status, body, args.reviewers, args.main_only)
    if problem:
        print(f"ci: {problem}", file=sys.stderr)
        return EX_CONFIG
    print(f"ci: environment {args.name!r} is protected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
