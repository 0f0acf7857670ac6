"""One reading of YAML: every command and the program read a stack file through stack/yaml_loader.py, as the
Pulumi CLI (gopkg.in/yaml.v3) reads it, and refuse what YAML 1.1 and the CLI would read otherwise, naming the
file, line and column. (e2e/tests/test_stack_file_reading.py asks the real CLI for each value of the table.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from stack import reader, yaml_loader
from stack.problems import ConfigError
from stack.yaml_loader import MAX_BYTES, StackFileError, load_yaml
from tests.support.pulumi_harness import ROOT

# (a scalar as written, what every reader takes it for, or the start of the refusal)
SCALARS = [
    ("true", True), ("False", False), ("12", 12), ("-3", -3), ("1.5", 1.5), ("1.5e+3", 1500.0), ("~", None),
    ("null", None), ("'yes'", "yes"), ('"0o17"', "0o17"), ("!!str 12", "12"), ("1x1", "1x1"), ("v6e-2x4", "v6e-2x4"),
    ("yes", "'yes' is a YAML 1.1 boolean, which the Pulumi CLI (YAML 1.2) reads as the text 'yes': write true"),
    ("Off", "'Off' is a YAML 1.1 boolean"), ("on", "'on' is a YAML 1.1 boolean"), ("NO", "'NO' is a YAML 1.1 boolean"),
    ("0o17", "'0o17' reads as text in YAML 1.1 but as the int 15 to the Pulumi CLI"),
    ("1e3", "'1e3' reads as text in YAML 1.1 but as the float 1000.0"),
    ("08", "'08' reads as text in YAML 1.1 but as the float 8.0"),
    ("+.5", "'+.5' reads as text in YAML 1.1 but as the float 0.5"),
    ("1:30", "'1:30' reads as the int 90 in YAML 1.1 but as text"),
    ("017", "'017' is the number 15 written otherwise than in decimals: write 15"),
    ("0x1F", "'0x1F' is the number 31 written otherwise"), ("1_000", "'1_000' is the number 1000 written otherwise"),
    ("2024-01-05", "'2024-01-05' reads as a date, which the Pulumi CLI turns into other text: quote it"),
    ("!!int 12", "has the tag 'tag:yaml.org,2002:int'"), ("<<", "has `<<` as a value"),
]


def _read(text: str):
    return load_yaml(Path("Pulumi.x.yaml"), text).data


@pytest.mark.parametrize("written, read", SCALARS, ids=[s for s, _ in SCALARS])
def test_a_scalar_is_read_as_the_cli_reads_it_or_refused(written, read):
    if isinstance(read, str) and " " in read:
        with pytest.raises(StackFileError) as err:
            _read(f"config:\n  key: {written}\n")
        assert str(err.value).startswith(f"Pulumi.x.yaml:2:8: {read}"), str(err.value)
    else:
        value = _read(f"config:\n  key: {written}\n")["config"]["key"]
        assert value == read and type(value) is type(read)


@pytest.mark.parametrize("text, where, what", [
    ("a: 1\nb:\n  c: 2\n  c: 3\n", "4:3", "has the key 'c' twice (first on line 3); the Pulumi CLI refuses a duplicate"),
    ("a: 1\n'a': 2\n", "2:1", "has the key 'a' twice"),
    ("1: a\n", "1:1", 'has the key 1, which is not text: write it quoted, "1"'),
    ("? [a]\n: b\n", "1:3", "has a key that is a list or a mapping"),
    ("b: &b {x: 1}\nr:\n  <<: *b\n  x: 2\n", "3:3", "merges the key 'x', which this mapping or another merge sets too"),
    ("b: &b {x: 1}\nc: &c {x: 2}\nr:\n  <<: [*b, *c]\n", "4:3", "merges the key 'x'"),
    ("b: &b {x: 1}\nr:\n  <<: *b\n  <<: *b\n", "4:3", "has a second `<<` (the first on line 3)"),
    ("b: &b [1]\nr:\n  <<: *b\n", "3:3", "merges (`<<`) something that is not a mapping"),
    ("a: [\n", "2:1", "not valid YAML: while parsing a flow node"),
    ("a: 1\n---\nb: 2\n", "2:1", "not valid YAML: expected a single document"),
    ("a: &a [*a]\n", "1:4", "refers to itself through an alias"),
    ("a: *nope\n", "1:4", "not valid YAML: found undefined alias 'nope'"),
    ("a: 1\nb: x\x00y\n", "2:5", "not valid YAML: the character U+0000 is not allowed"),
    ("a: 1\n\x07\n", "2:1", "not valid YAML: the character U+0007 is not allowed"),
])  # fmt: skip
def test_what_the_cli_refuses_or_reads_ambiguously_is_refused_with_its_place(text, where, what):
    with pytest.raises(StackFileError) as err:
        _read(text)
    assert str(err.value).startswith(f"Pulumi.x.yaml:{where}: {what}"), str(err.value)


def test_a_merge_that_adds_keys_reads_as_both_would():
    text = "base: &b {trainer: gemma-jax, pool: v6e}\nruns:\n  - <<: *b\n    name: a\n  - {<<: *b, name: b}\n"
    assert _read(text)["runs"] == [{"name": "a", "trainer": "gemma-jax", "pool": "v6e"},
                                   {"name": "b", "trainer": "gemma-jax", "pool": "v6e"}]


# 9**9 values from 81 aliases, as the stack's own keys (each would be read, and expanded, by the model).
BOMB = "config:\n" + "\n".join(['  gke-finetune:a: &a ["x","x","x","x","x","x","x","x","x"]'] + [
    f"  gke-finetune:{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]) + "\n"


def test_an_alias_bomb_is_refused_before_anything_expands_it(monkeypatch):
    """The aliases' expansion is counted on the node graph, each node once: nothing is built from a bomb."""
    monkeypatch.setattr(yaml_loader._Values, "of", lambda *_: pytest.fail("a value was built from the bomb"))
    with pytest.raises(StackFileError, match=r"^Pulumi.x.yaml:\d+:\d+: expands to more than 50000 values"):
        _read(BOMB)
    too_many = "a: &a x\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    with pytest.raises(StackFileError, match=r"has more than 100 aliases"):
        _read(too_many)
    with pytest.raises(StackFileError, match=r"nests more than 64 levels deep"):
        _read("a: " + "[" * 70 + "]" * 70 + "\n")


def test_a_bomb_in_another_stack_file_leaves_a_stacks_plan_alone(tmp_path):
    """The cross-stack check reads every stack file of the checkout: the bomb is refused there, unexpanded."""
    from tests.support.checkout import linked_checkout  # noqa: PLC0415
    from tools.plan.collect import collect  # noqa: PLC0415

    tree = linked_checkout(tmp_path)
    (tree / "Pulumi.bomb.yaml").write_text(BOMB)
    with pytest.raises(StackFileError, match="expands to more than"):
        reader.load_files("bomb", tree)
    assert collect("dev", tree)["stack"] == "dev"


def _tree(tmp_path: Path, stack_text: bytes | str) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_bytes(stack_text if isinstance(stack_text, bytes) else stack_text.encode())
    return tmp_path


def _dev_with(line_after: str, new: str) -> str:
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    assert line_after in text
    return text.replace(line_after, line_after + new, 1)


@pytest.mark.parametrize("new, expected", [
    ("\n      suspend: yes", "Pulumi.mine.yaml:33:16: 'yes' is a YAML 1.1 boolean"),
    ("\n      profile: false", "Pulumi.mine.yaml:33:7: has the key 'profile' twice (first on line 32)"),
])  # fmt: skip
def test_the_commands_read_a_stack_file_through_the_loader(tmp_path, new, expected):
    root = _tree(tmp_path, _dev_with("      profile: true", new))
    with pytest.raises(StackFileError) as err:
        reader.load_files("mine", root)
    assert str(err.value).startswith(expected), str(err.value)


@pytest.mark.parametrize("value, expected", [
    ("12345", "Pulumi.mine.yaml:8:3: gke-finetune:namespace: 12345 is a number; the key is text (quote it"),
    ("", "Pulumi.mine.yaml:8:3: gke-finetune:namespace: has no value; give it text"),
    ("null", "Pulumi.mine.yaml:8:3: gke-finetune:namespace: has no value"),
    ("[a, b]", 'Pulumi.mine.yaml:8:3: gke-finetune:namespace: ["a", "b"] is a list; the key is text'),
])  # fmt: skip
def test_a_top_level_value_of_another_kind_than_declared_is_refused_with_its_place(tmp_path, value, expected):
    root = _tree(tmp_path, _dev_with("  gcp:region: us-east5", f"\n  gke-finetune:namespace: {value}"))
    with pytest.raises(ConfigError) as err:
        reader.load_files("mine", root)
    assert err.value.problems[0].startswith(expected), err.value.problems


def test_quoted_it_is_text_and_read_as_the_cli_hands_it_over(tmp_path):
    root = _tree(tmp_path, _dev_with("  gcp:region: us-east5", '\n  gke-finetune:namespace: "12345"\n'
                                     "  gke-finetune:deletionProtection: false"))
    config = reader.load_files("mine", root)
    assert config.namespace == "12345" and config.deletion_protection is False


def test_the_program_refuses_what_the_commands_refuse(tmp_path):
    """Under the CLI the program gets `suspend: "yes"` as text in the runs' JSON: refused as not a boolean,
    and its stack file, read through the same loader, refused with its place."""
    from tests.support.pulumi_harness import declared_before_error  # noqa: PLC0415

    runs = reader.file_values("dev", ROOT)["gke-finetune:runs"]
    declared, err = declared_before_error("dev", overrides={"gke-finetune:runs": [{**runs[0], "suspend": "yes"}]})
    assert isinstance(err, ConfigError) and declared.resources == []
    assert "runs[0].suspend: 'yes' is text; allowed: true or false" in err.problems
    from tests.support.checkout import linked_checkout  # noqa: PLC0415

    tree = linked_checkout(tmp_path)
    (tree / "Pulumi.dev.yaml").write_text(_dev_with("      profile: true", "\n      suspend: yes"))
    declared, err = declared_before_error("dev", root=tree)
    assert isinstance(err, ConfigError) and declared.resources == []
    assert str(err).startswith("Pulumi.dev.yaml:33:16: 'yes' is a YAML 1.1 boolean"), str(err)


@pytest.mark.parametrize("content, expected", [
    (b"config:\n  gcp:project: caf\xe9\n", "Pulumi.mine.yaml:2:19: is not UTF-8 (byte 0xe9); save the file as UTF-8"),
    (b"\xef\xbb\xbfconfig: {}\n", None),  # a byte-order mark, dropped as the CLI drops it
    (b"a: " + b"x" * (MAX_BYTES + 1), "Pulumi.mine.yaml: is larger than 1024 KiB"),
])  # fmt: skip
def test_a_file_that_is_not_text_or_too_large_is_named(tmp_path, content, expected):
    root = _tree(tmp_path, content)
    if expected is None:
        assert reader.read_file(root / "Pulumi.mine.yaml") == {}
        return
    with pytest.raises(StackFileError) as err:
        reader.read_file(root / "Pulumi.mine.yaml")
    assert str(err.value).startswith(expected), str(err.value)


def test_an_unreadable_or_missing_stack_file_is_named(tmp_path, monkeypatch):
    root = _tree(tmp_path, "config: {}\n")
    with pytest.raises(StackFileError, match=r"^Pulumi.nosuch.yaml: no such stack file in .*; stacks: mine$"):
        reader.load_files("nosuch", root)

    real_open = open

    def denied(path, *args, **kwargs):  # as open() answers a file whose mode lets this user not read it
        if Path(path).name == "Pulumi.mine.yaml":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("stack.yaml_loader.open", denied, raising=False)
    with pytest.raises(StackFileError, match=r"^Pulumi.mine.yaml: can't be read: Permission denied$"):
        reader.load_files("mine", root)
