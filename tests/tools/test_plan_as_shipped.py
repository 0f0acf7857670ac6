"""`make plan STACK=a4` works as shipped: the stack holds no token (its run's is in Secret Manager), and the plan
shows how the token reaches that run, by name, never a value."""

from __future__ import annotations

import subprocess
import sys

from tests.support.pulumi_harness import ROOT


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.plan", "show", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_the_a4_stack_plans_as_shipped_with_the_token_mounted_from_secret_manager(tmp_path):
    done = plan("--stack", "a4", "--out", str(tmp_path / "manifests"))
    assert done.returncode == 0, done.stderr
    assert "SecretProviderClass  runs-workspace-hf-token" in done.stdout
    assert "gcp:secretmanager/secretIamMember:SecretIamMember  hf-token-trainer" in done.stdout
    assert "kubernetes:core/v1:Secret " not in done.stdout and "planned as set" not in done.stdout
