"""A user's own stack file: planned and validated like a shipped one, never compared with a golden.

The repository ships the stacks of tools/stacks.py `SHIPPED`: the tests, the
goldens, the e2e and the scan take those and no others. Every other
`Pulumi.<name>.yaml` of a checkout is a user's own (README, "Your stack file"),
and each is checked here the way the platform tests check a shipped stack:
the stack file validates, the program declares it (under mocks, as `up` and
as `preview`), every manifest it applies passes the schemas and the syntax
rules, and the offline plan plans it. A copy of the checkout with a shipped
stack copied to a new name, and one stack file that is not YAML, shows the
whole: the tests take the copy as the user's, `make plan` plans it, and the
broken file is named in one line while the other stacks still plan.
"""

from __future__ import annotations

import re
import shutil
import sys
import xml.etree.ElementTree as ET

import kubernetes_validate
import pytest

from admission import syntax
from core.names import KUBERNETES_VERSION
from stack import reader
from tests.support import schemas
from tests.support.checkout import copy_checkout, make_args, run_in
from tools import offline, render, stacks
from tools.plan.collect import collect

ROOT = offline.ROOT
OWN = stacks.own(ROOT)
# A stack file that YAML can't read: the flow sequence on line 3 is never closed.
BROKEN = "config:\n  gcp:project: my-project-id\n  gcp:region: [us-east5\n  gke-finetune:runs: []\n"


def check_own_stack(stack: str) -> None:
    """What the platform tests check of a shipped stack, but its goldens (the user's runs have none)."""
    config = reader.load_files(stack, ROOT)
    assert offline.run_stack(stack).resources  # the program, with its admission checks, as `up` runs it
    assert offline.run_stack(stack, preview=True).resources  # ... and as `preview` runs it
    for name, manifest in render.stack_manifests(stack).items():
        assert schemas.manifest_errors(manifest) == [], name
        assert syntax.jobset_findings(manifest) == [], name
    for name, job in render.staging_manifests(stack).items():
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
        assert list(syntax.pod_findings(job["spec"]["template"], "spec.template")) == [], name
        assert list(syntax.object_name_findings(job["metadata"], "metadata")) == [], name
    for name, obj in render.stack_kueue_manifests(stack).items():
        assert schemas.kueue_errors(obj) == [] and syntax.kueue_findings(obj) == [], name
    planned = collect(stack)
    assert planned["stack"] == stack and len(planned["manifests"]) == len(config.runs)


@pytest.mark.parametrize("stack", OWN or [None], ids=lambda s: s or "none")
def test_each_own_stack_file_is_planned_and_valid(stack):
    if stack is None:  # a checkout without a stack file of the user's: every one is a shipped one
        assert list(stacks.stack_files(ROOT)) == sorted(stacks.SHIPPED)
        return
    check_own_stack(stack)


def test_the_shipped_stacks_are_named_and_each_has_its_file():
    assert stacks.shipped(ROOT) == list(stacks.SHIPPED)
    assert set(offline.SHIPPED_STACKS) | set(offline.EXISTING_CLUSTER_STACKS) == set(stacks.SHIPPED)
    assert render.shipped_stacks() == list(stacks.SHIPPED)


def test_a_stack_file_that_is_not_yaml_is_named_with_line_and_column(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.mine.yaml").write_text(BROKEN)
    with pytest.raises(reader.StackFileError) as err:
        reader.load_files("mine", tmp_path)
    assert str(err.value) == ("Pulumi.mine.yaml:4:20: not valid YAML: while parsing a flow sequence: "
                              "expected ',' or ']', but got ':'")
    (tmp_path / "Pulumi.mine.yaml").write_text("- a list\n")
    with pytest.raises(reader.StackFileError, match=r"^Pulumi\.mine\.yaml:1:1: is a YAML list; a stack file is a mapping"):
        reader.load_files("mine", tmp_path)


# --- a user's checkout ------------------------------------------------------------------


@pytest.fixture(scope="module")
def users_checkout(tmp_path_factory):
    """A copy of the checkout holding Pulumi.mine.yaml (a copy of dev's) and Pulumi.broken.yaml (not YAML)."""
    tree = copy_checkout(tmp_path_factory.mktemp("users-checkout"))
    shutil.copy(tree / "Pulumi.dev.yaml", tree / "Pulumi.mine.yaml")
    (tree / "Pulumi.broken.yaml").write_text(BROKEN)
    return tree


def _platform_tests(tree) -> list[str]:
    """`make test`'s platform test folders (PLATFORM_TESTS of the Makefile)."""
    match = re.search(r"^PLATFORM_TESTS := (.+)$", (tree / "Makefile").read_text(), re.M)
    assert match, "no PLATFORM_TESTS in the Makefile"
    return match.group(1).split()


def _names_own_stack(test_id: str) -> bool:
    return bool(re.search(r"[\[/-](mine|broken)[\]/-]", test_id))


def test_no_test_of_the_shipped_stacks_takes_a_users_stack_file(users_checkout):
    proc = run_in(users_checkout, _python(), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                  *_platform_tests(users_checkout))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert len(ids) > 500
    taking = [i for i in ids if _names_own_stack(i)]
    assert taking and all(i.startswith("tests/tools/test_own_stack_files.py::") for i in taking), taking


def test_the_stack_and_manifest_tests_pass_and_the_users_files_are_checked(users_checkout, tmp_path):
    report = tmp_path / "report.xml"
    own = "tests/tools/test_own_stack_files.py::test_each_own_stack_file_is_planned_and_valid"
    proc = run_in(users_checkout, _python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                  "tests/stack", "tests/manifests", own)
    outcomes = _outcomes(report)
    assert outcomes[own + "[mine]"] == "passed"
    # The broken file fails its own check, with the one line that names it; nothing else fails.
    assert outcomes[own + "[broken]"].startswith("failed: ")
    assert "Pulumi.broken.yaml:4:20: not valid YAML" in outcomes[own + "[broken]"]
    failed = [t for t, o in outcomes.items() if o != "passed"]
    assert failed == [own + "[broken]"], proc.stdout[-3000:]
    assert len(outcomes) > 400


def test_make_plan_plans_a_users_stack_and_names_a_broken_one_in_one_line(users_checkout):
    mine = run_in(users_checkout, *make_args("plan", "STACK=mine"))
    assert mine.returncode == 0, mine.stderr[-3000:]
    assert mine.stdout.startswith("Stack mine: ") and "Run manifests (1) written to plan/mine/manifests/" in mine.stdout
    shipped = run_in(users_checkout, *make_args("plan", "STACK=dev"))  # beside a file that isn't YAML
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert shipped.stdout.startswith("Stack dev: ")
    broken = run_in(users_checkout, *make_args("plan", "STACK=broken"))
    assert broken.returncode != 0 and broken.stdout == ""
    ours = [line for line in broken.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == ["Pulumi.broken.yaml:4:20: not valid YAML: while parsing a flow sequence: "
                    "expected ',' or ']', but got ':' (stack broken: nothing planned)"]


def test_the_scan_takes_the_shipped_stacks_only(users_checkout):
    dry = run_in(users_checkout, *make_args("-n", "-o", ".venv-scan/.installed", "scan"))
    assert dry.returncode == 0, dry.stderr
    [loop] = [line for line in dry.stdout.splitlines() if "for stack in" in line]
    assert re.search(r"for stack in (.*?);", loop).group(1).split() == list(stacks.SHIPPED)


def _python() -> str:
    return sys.executable


def _outcomes(report) -> dict[str, str]:
    """test id -> 'passed', or '<failed|error|skipped>: <message>', from pytest's JUnit XML report."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"
        problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        tag = {"failure": "failed"}.get(problem.tag, problem.tag) if problem is not None else ""
        outcomes[test_id] = "passed" if problem is None else f"{tag}: {problem.get('message', '')}"
    return outcomes


def test_a_checkouts_stack_files_are_the_shipped_ones_and_the_users(tmp_path):
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.mine.yaml", "Pulumi.a4.yaml", "Pulumi.yaml.bak"):
        (tmp_path / name).write_text("config: {}\n")
    assert list(stacks.stack_files(tmp_path)) == ["a4", "dev", "mine"]
    assert stacks.shipped(tmp_path) == ["a4", "dev"] and stacks.own(tmp_path) == ["mine"]
    # A change to a user's stack file affects that stack (its plan diff, or its preview when deployed).
    assert stacks.affected_by(["Pulumi.mine.yaml"], list(stacks.stack_files(tmp_path))) == ["mine"]
