"""`make help` lists every target a user may call, and names no target the Makefile lacks."""

from __future__ import annotations

from tests.support.makefile import help_mismatch, user_targets
from tools.offline import ROOT


def test_make_help_lists_every_target_a_user_may_call_and_nothing_else():
    missing, unknown = help_mismatch(ROOT)
    assert missing == set(), f"targets `make help` does not list: {sorted(missing)}"
    assert unknown == set(), f"`make help` names targets the Makefile does not have: {sorted(unknown)}"


def test_the_run_commands_and_the_cloud_commands_are_user_targets():
    assert {"plan", "plan-diff", "doctor", "handoff", "up", "preview", "destroy", "status", "logs", "cancel", "resume",
            "inspect", "test", "e2e", "help", "download", "generate"} <= user_targets(ROOT)
    assert not {"_stack", ".pulumi-state", ".venv/.installed"} & user_targets(ROOT)


def test_a_target_left_out_of_help_and_a_help_line_for_no_target_are_both_found(tmp_path):
    makefile = (ROOT / "Makefile").read_text()
    assert '"  make venvs ' in makefile
    makefile = makefile.replace('"  make venvs ', '"  make venvz ', 1)
    (tmp_path / "Makefile").write_text(makefile + "\n.PHONY: new-thing\nnew-thing:\n\t@true\n")
    assert help_mismatch(tmp_path) == ({"new-thing", "venvs"}, {"venvz"})
