"""The README's "Fine-tune on your own data" stack excerpt, as a newcomer copies it, passes the stack's
checks and admission (a run on `dev`'s pool), and the record it shows is a valid conversational one."""

from __future__ import annotations

import json
import re

import yaml

from admission.check import admit
from stack.config import StackConfig
from tests.support.pulumi_harness import ROOT
from trainers.sft_data import formats

SECTION = ROOT.joinpath("README.md").read_text().split("## Fine-tune on your own data", 1)[1].split("\n## ", 1)[0]


def test_the_readme_example_is_a_valid_stack_and_is_admitted(tmp_path, monkeypatch):
    record = json.loads(re.search(r"```json\n\s*(\{.*\})\n", SECTION).group(1))
    formats.check_rows(formats.Spec.of("conversational"), [record])
    excerpt = re.search(r"```yaml\n(.*?)```", SECTION, re.S).group(1)
    config = {k.split(":", 1)[1]: v for k, v in yaml.safe_load(excerpt).items()}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tickets.jsonl").write_text(json.dumps(record) + "\n")
    monkeypatch.chdir(tmp_path)  # `path` is read relative to where `pulumi up` runs
    dev = yaml.safe_load(ROOT.joinpath("Pulumi.dev.yaml").read_text())["config"]
    stack = StackConfig.from_mapping({"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"],
                                      "pools": dev["gke-finetune:pools"], **config})
    admitted = admit(stack)
    [run] = admitted.runs
    assert (run.format, run.model, admitted.data_paths()[run.name]) == (
        "conversational", "gemma3-270m", "tickets/tickets.jsonl")
