"""`make status` shows each run's console page and Cloud Logging query (the links the stack outputs carry)."""

from __future__ import annotations

from stack.places import stack_run_links
from stack.reader import load_files
from tests.support.pulumi_harness import ROOT
from tools.status import table
from tools.status.row import run_facts
from tools.status.sources import empty


class NoRecords:
    def read(self, run, prefix=None):
        return None, ""


def test_the_details_end_with_the_runs_links_and_json_carries_them():
    config = load_files("dev", ROOT)
    [row] = table.rows(run_facts(config), empty(), NoRecords(), 0.0)
    links = stack_run_links(config)["gemma3-single-host"]
    assert row.links == links and row.as_dict()["links"] == links
    details = table.render_details(row)
    assert details[-2:] == [f"  console          {links['console']}", f"  logs             {links['logs']}"]
