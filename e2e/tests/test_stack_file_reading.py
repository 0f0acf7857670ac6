"""The stack file as the real Pulumi CLI reads it, against the one YAML loader (stack/yaml_loader.py), and a
refused stack in a real `pulumi preview`: its message alone, no traceback.

`pulumi config --json` says what the CLI hands the program for each value; the loader either reads the value
to the same text (reader.cli_text) or refuses it, and then YAML 1.1 (PyYAML, what the loader parses with) would
have read it otherwise, or it is written otherwise than a person reads it. A preview of a stack the program
refuses ends with the program's RunError text (the Python language host logs it alone) and the CLI's exit code.
No control plane: the CLI, its Python language host and the program, with a local backend.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from e2e.harness.engine import engine
from e2e.harness.tools import tools
from stack.reader import cli_text
from stack.yaml_loader import StackFileError, load_yaml

STACK = "reading"
SCALARS = ["true", "False", "12", "-3", "1.5", "1.0", "'yes'", "1x1", "v6e-2x4", "yes", "Off", "on", "NO", "0o17",
           "1e3", "08", "+.5", "1:30", "017", "0x1F", "1_000", "2024-01-05", "[1, 2.0, 'x']", "{a: 1, b: [yes]}"]
# Refused although both read them alike: written otherwise than in plain decimals.
WRITTEN_OTHERWISE = {"017", "0x1F", "1_000"}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    where = tmp_path_factory.mktemp("reading")
    return engine(tools(("pulumi", "pulumi-language-python", "pulumi-kubernetes")), where, STACK,
                  where / "no-kubeconfig")


def _write(made, text: str) -> None:
    salt = [line for line in made.stack_file.read_text().splitlines() if line.startswith("encryptionsalt")] \
        if made.stack_file.exists() else []
    made.stack_file.write_text("\n".join(salt + [text]) + "\n")


def test_the_cli_hands_over_what_the_loader_reads_or_the_loader_refuses(made):
    _write(made, "config:\n" + "".join(f"  probe:k{i}: {s}\n" for i, s in enumerate(SCALARS)))
    told = json.loads(made.run("config", "--json", "--show-secrets").stdout)
    for i, written in enumerate(SCALARS):
        cli = told[f"probe:k{i}"]["value"]
        try:
            ours = load_yaml(Path("Pulumi.x.yaml"), f"k: {written}\n").data["k"]
        except StackFileError:
            yaml_11 = yaml.safe_load(f"k: {written}\n")["k"]
            assert written in WRITTEN_OTHERWISE or _as_cli(yaml_11) != cli, (written, cli, yaml_11)
            continue
        assert cli_text(ours) == cli or json.loads(cli) == json.loads(cli_text(ours)), (written, cli, ours)


def _as_cli(value) -> str | None:
    """What the CLI would hand over for a value of YAML 1.1's reading; None for one it has no text for (a date)."""
    try:
        return cli_text(value)
    except TypeError:
        return None


def test_the_cli_refuses_a_duplicate_key_as_the_loader_does(made):
    _write(made, "config:\n  probe:a: 1\n  probe:a: 2\n")
    step = made.run("config", "--json", check=False)
    assert step.returncode != 0 and re.search(r'mapping key "probe:a" already defined at line \d', step.output), step.output
    with pytest.raises(StackFileError, match="has the key 'probe:a' twice"):
        load_yaml(Path("Pulumi.x.yaml"), "config:\n  probe:a: 1\n  probe:a: 2\n")


def _dev_config(**changes) -> str:
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "Pulumi.dev.yaml").read_text())["config"]
    config["gcp:project"] = "gke-finetune-e2e"
    config.update(changes)
    return yaml.safe_dump({"config": config}, sort_keys=False)


@pytest.mark.parametrize("case, text, said", [
    ("suspend quoted", lambda: _dev_config().replace("profile: true", "profile: true\n    suspend: 'yes'"),
     "runs[0].suspend: 'yes' is text; allowed: true or false"),
    ("suspend: yes", lambda: _dev_config().replace("profile: true", "profile: true\n    suspend: yes"),
     "Pulumi.reading.yaml:"),
    ("namespace 12345", lambda: _dev_config(**{"gke-finetune:namespace": 12345}),
     "gke-finetune:namespace: 12345 is a number; the key is text"),
    ("path out", lambda: _dev_config(**{"gke-finetune:datasets": [{"name": "env", "path": "/proc/self/environ"}],
                                        "gke-finetune:runs": []}),
     "datasets[0].path: '/proc/self/environ' is absolute"),
])  # fmt: skip
def test_a_refused_stack_is_its_message_alone_in_a_real_preview(made, case, text, said):
    _write(made, text())
    step = made.run("preview", check=False)
    assert step.returncode != 0, step.output
    assert said in step.output, step.output
    assert "Traceback" not in step.output and "unhandled exception" not in step.output, step.output
    assert re.search(r"stack reading: |Pulumi\.reading\.yaml:\d+:\d+: ", step.output), step.output
    assert step.returncode == 1, step.output  # README.md: `make preview` exits as the CLI does, 1


def test_the_cli_refuses_a_control_character_as_the_loader_does(made):
    _write(made, "config:\n  probe:a: x\x07y\n")
    step = made.run("config", "--json", check=False)
    assert step.returncode != 0 and "control characters are not allowed" in step.output, step.output
    with pytest.raises(StackFileError, match="U\\+0007 is not allowed"):
        load_yaml(Path("Pulumi.x.yaml"), "config:\n  probe:a: x\x07y\n")
