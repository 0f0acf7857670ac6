"""`make plan STACK=a4` works as shipped: the Hugging Face token it needs and does not hold is planned as set, as
`pulumi preview` plans it, and the plan says so first."""

from __future__ import annotations

import subprocess
import sys

from tests.support.pulumi_harness import ROOT

NOTE = "hfToken: not set; planned as set, as `pulumi preview` plans it"


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.plan", "show", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_the_a4_stack_plans_as_shipped_and_says_the_token_is_planned_as_set(tmp_path):
    done = plan("--stack", "a4", "--out", str(tmp_path / "manifests"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(NOTE)
    assert "kubernetes:core/v1:Secret" in done.stdout  # the token's Secret is planned


def test_a_token_given_is_not_said_to_be_missing(tmp_path):
    done = plan("--stack", "a4", "--secret", "hfToken", "--out", str(tmp_path / "manifests"))
    assert done.returncode == 0 and NOTE not in done.stdout
