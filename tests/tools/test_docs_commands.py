"""Every command the README and docs/ show is one that runs: the offline ones are run, the others held
to the Makefile, the Pulumi CLI and the project's tools (the rules: tests/support/doc_commands.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import doc_commands
from tests.support.checkout import make_args
from tests.support.makefile import user_targets
from tools.offline import ROOT

DOCTOR_ANSWERS = ROOT / "tests" / "tools" / "doctor"


def _all_commands(root: Path = ROOT) -> list[doc_commands.Command]:
    return [c for path in doc_commands.doc_files(root) for c in doc_commands.commands(path)]


@pytest.fixture(scope="module")
def pulumi() -> str:
    """The Pulumi CLI the e2e builds from its pinned Go module (e2e/tools/pulumi), built here if missing."""
    build = subprocess.run(["bash", str(ROOT / "e2e/tools/build.sh"), "pulumi"], capture_output=True, text=True,
                           timeout=3600)
    assert build.returncode == 0, f"building the Pulumi CLI (needs the go command): {build.stderr[-2000:]}"
    where = subprocess.run(["bash", str(ROOT / "e2e/tools/build.sh"), "--where", "pulumi"],
                           capture_output=True, text=True, check=True).stdout.split()[1]
    return f"{where}/bin/pulumi"


def test_the_docs_show_commands_of_every_kind_checked():
    found = _all_commands()
    programs = {c.program for c in found}
    assert {"make", "pulumi", "python"} <= programs, programs
    assert len([c for c in found if c.in_block]) >= 20


def test_every_shell_block_parses_as_bash():
    for path in doc_commands.doc_files(ROOT):
        for line, block in doc_commands.shell_blocks(path):
            done = doc_commands.parses_as_bash(block)
            assert done.returncode == 0, f"{path.name}:{line}: {done.stderr}"


def test_every_make_command_names_a_target_and_variables_the_makefile_has():
    problems = doc_commands.check_make(_all_commands(), user_targets(ROOT), doc_commands.makefile_variables(ROOT))
    assert problems == [], "\n".join(problems)


def test_every_pulumi_command_and_flag_is_one_the_cli_has(pulumi):
    problems = doc_commands.check_pulumi(_all_commands(), pulumi)
    assert problems == [], "\n".join(problems)


def test_every_project_tool_command_is_one_the_tool_takes():
    problems = doc_commands.check_python(_all_commands(), ROOT)
    assert problems == [], "\n".join(problems)


def test_the_offline_commands_run_as_shown():
    runnable = doc_commands.runnable(_all_commands())
    assert any(c.words[1:2] == ("plan",) for c in runnable), [str(c) for c in runnable]
    for command in runnable:
        done = subprocess.run(make_args(*command.words[1:]), cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")})
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if "plan" in command.words:
            assert "Run manifests (" in done.stdout.splitlines()[-1], f"{command}: {done.stdout[-500:]}"


def test_the_doctor_report_shown_is_what_make_doctor_prints_from_recorded_answers(tmp_path):
    """The docs' report of a machine with nothing set up, replayed from tests/tools/doctor/."""
    shown = [b for path in doc_commands.doc_files(ROOT) for b in doc_commands.output_blocks(path)
             if b.startswith("make doctor STACK=doctor:")]
    assert shown, "no `make doctor` report in the README or docs/"
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path)
    shutil.copy(DOCTOR_ANSWERS / "Pulumi.doctor.yaml", tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "HF_TOKEN")}
    done = subprocess.run(make_args("doctor", "STACK=doctor", f"DOCTOR_ARGS=--root {tmp_path} --answers "
                                    f"{DOCTOR_ANSWERS / 'nothing-set-up.json'}"),
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert "make doctor: exit code 1" in done.stderr, done.stderr
    printed = done.stdout.splitlines()
    for report in shown:
        at = 0
        for line in (l for l in report.splitlines() if l.strip() != "..."):
            assert line in printed[at:], f"the docs show {line!r}; make doctor printed:\n{done.stdout}"
            at = printed.index(line, at) + 1


WRONG = """
# A guide with a wrong command of each kind

```sh
make plann STACK=dev            # no such target
make plan STAK=dev              # no such variable
pulumi stak output bucketUrl    # no such command
pulumi stack outptu             # no such subcommand
pulumi config set --secrett hfToken x
python -m tools.status shwo --stack dev
python -m tools.plan show --stak dev
echo "unclosed
```

Inline too: `pulumi up --targett x` and `make inspekt STACK=dev RUN=<run>`; not a command:
`make status: exit code 66`.
"""


def test_each_check_finds_a_wrong_command_of_its_kind(tmp_path, pulumi):
    (tmp_path / "README.md").write_text(WRONG)
    found = _all_commands(tmp_path)
    assert len(found) == 9, [str(c) for c in found]
    make = doc_commands.check_make(found, user_targets(ROOT), doc_commands.makefile_variables(ROOT))
    assert [p.split(": ", 2)[2][:32] for p in make] == [
        "'plann' is no target a user may ", "the Makefile reads no variable '", "'inspekt' is no target a user ma"]
    cli = doc_commands.check_pulumi(found, pulumi)
    assert [p.split(": ", 2)[2] for p in cli] == [
        "'stak' is not a pulumi command", "`pulumi stack` has no command 'outptu'",
        "`pulumi config set` has no flag --secrett", "`pulumi up` has no flag --targett"]
    tools = doc_commands.check_python(found, ROOT)
    assert [p.split(": ", 2)[2][:40] for p in tools] == [
        "'shwo' is not a command of tools.status;", "`python -m tools.plan show` has no optio"]
    (line, block), = doc_commands.shell_blocks(tmp_path / "README.md")
    assert doc_commands.parses_as_bash(block).returncode == 2
    assert line == 5
