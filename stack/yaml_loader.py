"""The one YAML loader of the project: every command, the program's reader and the stack-file editor read
Pulumi.yaml and Pulumi.<stack>.yaml through `load_yaml`, so they all read one file one way.

What a stack file means is what the Pulumi CLI reads in it: pulumi/pulumi v3.274.1 (the e2e's CLI) loads a
stack file with gopkg.in/yaml.v3 v3.0.1 (sdk/go/common/encoding/marshal.go `yamlMarshaler.Unmarshal`, called
by sdk/go/common/workspace/loaders.go `LoadProjectStackBytes` into an `any`). This loader parses with PyYAML
(YAML 1.1) and accepts only what both read alike; where they differ it refuses, saying what to write:

- booleans: yaml.v3 resolves only true/True/TRUE and false/False/FALSE (resolve.go `resolveMapList`);
  YAML 1.1's yes/no/on/off are text to it when decoded into an `any` (decode.go: the 1.1 forms are taken
  only "if explicitly attempting to unmarshal into a typed bool value"), and booleans to PyYAML: refused;
- numbers: yaml.v3 reads 0o17, 1e3, 08 or +.5 as numbers where YAML 1.1 reads text (or another number), and
  1:30 is 90 to YAML 1.1 only: a number is accepted only in plain decimals that both read as that number;
- dates: yaml.v3 turns a plain 2024-01-05 into a time, which Pulumi makes the text
  "2024-01-05 00:00:00 +0000 UTC" (sdk/go/common/resource/config/object.go `unmarshalObject`): refused;
- duplicate keys: yaml.v3 refuses them ("mapping key already defined", decode.go `mapping`, uniqueKeys);
  PyYAML keeps the last one: refused here, with both lines;
- merge keys (`<<`): both merge, the mapping's own keys first (decode.go `merge`); refused where a key comes
  both from the mapping and from a merge, or from two merges (the reader can't see which wins);
- mapping keys are text: Pulumi makes every key text (`fmt.Sprintf("%v", k)`), so `1:` and `"1":` would be
  one key: a key that is not text is refused;
- explicit tags other than !!str, !!map and !!seq are refused.

A file is refused past MAX_BYTES, an alias past MAX_ALIASES, nesting past MAX_DEPTH and a document whose
aliases expand past MAX_NODES nodes (an alias bomb is refused in milliseconds, before anything expands it).
Every refusal is one line, `<file>:<line>:<column>: <what>`, as compilers print it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from stack.problems import ConfigError

MAX_BYTES = 1 << 20  # a stack file is a few KiB; a run's object can't exceed 1.5 MiB anyway (core/syntax.py)
MAX_ALIASES = 100
MAX_DEPTH = 64
MAX_NODES = 50_000  # every node counted as often as aliases repeat it

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT, _MERGE = (_TAG + t for t in ("str", "null", "bool", "int", "float", "merge"))
_TEXT = object()  # what yaml.v3 reads as text
_A_DATE = object()  # a plain scalar one of them reads as a date
# yaml.v3's hint of a plain scalar's first character (resolve.go `resolveTable`): 0 means text.
_HINTS = {**{c: "S" for c in "+-"}, **{c: "D" for c in "0123456789"}, **{c: "M" for c in "yYnNtTfFoO~"}, ".": "."}
_V3_WORDS = {**dict.fromkeys(("true", "True", "TRUE"), True), **dict.fromkeys(("false", "False", "FALSE"), False),
             **dict.fromkeys(("", "~", "null", "Null", "NULL"), None), ".nan": math.nan, ".NaN": math.nan,
             ".NAN": math.nan, **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
             **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf)}
_V3_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_INT = re.compile(r"(?P<sign>[-+]?)(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[oO](?P<oct>[0-7]+)|0[bB](?P<bin>[01]+)"
                     r"|(?P<old>0[0-7]*)|(?P<dec>[1-9][0-9]*))")
# Numbers as both write them alike; 017, 0x1F or 1_000 read alike too, but not as a person reads them.
_DECIMAL = re.compile(r"[-+]?(0|[1-9][0-9]*)|[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+][0-9]+)?|[-+]?\.(inf|Inf|INF)"
                      r"|\.(nan|NaN|NAN)")
_DATE = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?")


class StackFileError(ConfigError):
    """A file that can't be read as one: one line, `<file>:<line>:<column>: <what>`, so that an editor jumps to
    the spot and a tool reading many files names the one."""

    def __init__(self, line: str):
        super().__init__([line])
        self.args = (line,)

    def __str__(self) -> str:
        return self.problems[0]


@dataclass(frozen=True)
class YamlDocument:
    """A file read: its text, its values (dicts, lists, str, int, float, bool, None) and its node tree, whose
    marks give every key's and value's line and column (the stack-file editor uses them)."""

    name: str
    text: str
    data: Any
    root: Node | None

    def node_at(self, *path: str | int) -> tuple[Node | None, Node | None]:
        """(key node, value node) at a path of keys and list indexes; (None, None) where there is none. A key a
        merge (`<<`) brings is not found: it is not written in that mapping."""
        key, node = None, self.root
        for step in path:
            if isinstance(node, MappingNode) and isinstance(step, str):
                key, node = next(((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == step),
                                 (None, None))
            elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
                key, node = None, node.value[step]
            else:
                return None, None
        return key, node

    def mark_of(self, *path: str | int) -> Any:
        """Where the key at `path` is written (its value's place for a list item); None where it isn't."""
        key, node = self.node_at(*path)
        found = key or node
        return found.start_mark if found is not None and path else None


def at(name: str, mark: Any, what: str) -> StackFileError:
    where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else f"{name}:1:1"
    return StackFileError(f"{where}: {what}")


def read_text(path: Path) -> str:
    """The file's text: at most MAX_BYTES, UTF-8 (a byte-order mark dropped, as the CLI's
    `readFileStripUTF8BOM` does); StackFileError naming the file otherwise."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise StackFileError(f"{path.name}: no such file in {path.parent}") from None
    except OSError as err:
        raise StackFileError(f"{path.name}: can't be read: {err.strerror or err}") from None
    if len(raw) > MAX_BYTES:
        raise StackFileError(f"{path.name}: is larger than {MAX_BYTES // 1024} KiB; a stack file is a few KiB")
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise StackFileError(f"{path.name}:{line}:{column}: is not UTF-8 (byte 0x{raw[err.start]:02x}); "
                            "save the file as UTF-8") from None


def load_yaml(path: Path, text: str | None = None) -> YamlDocument:
    """The file at `path` (or `text`, as that file) read as the Pulumi CLI reads it, or StackFileError."""
    text = read_text(path) if text is None else text
    if len(text.encode()) > MAX_BYTES:
        raise StackFileError(f"{path.name}: is larger than {MAX_BYTES // 1024} KiB; a stack file is a few KiB")
    try:
        loader = _Loader(text, path.name)
    except yaml.reader.ReaderError as err:  # a control character, checked before any parsing
        raise _unprintable(path.name, text, err) from None
    try:
        root = loader.get_single_node()
    except yaml.reader.ReaderError as err:
        raise _unprintable(path.name, text, err) from None
    except yaml.MarkedYAMLError as err:
        what = ": ".join(part for part in (err.context, err.problem) if part)
        raise at(path.name, err.problem_mark or err.context_mark, f"not valid YAML: {what}") from None
    except yaml.YAMLError as err:
        raise StackFileError(f"{path.name}: not valid YAML: {err}") from None
    finally:
        loader.dispose()
    if root is None:
        return YamlDocument(path.name, text, None, None)
    _expanded_size(root, path.name, {}, set())
    return YamlDocument(path.name, text, _Values(loader, path.name).of(root), root)


def _unprintable(name: str, text: str, err: yaml.reader.ReaderError) -> StackFileError:
    """A character YAML allows nowhere (a NUL, a control character): its line and column, and its code. The CLI
    refuses it too (gopkg.in/yaml.v3 readerc.go: "control characters are not allowed")."""
    before = text[:err.position]
    line, column = before.count("\n") + 1, err.position - (before.rfind("\n") + 1) + 1
    return StackFileError(f"{name}:{line}:{column}: not valid YAML: the character U+{err.character:04X} is not "
                          "allowed in a YAML file (a control character); remove it")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, composing nodes only, with aliases and nesting counted as they come."""

    def __init__(self, text: str, name: str):
        super().__init__(text)
        self.name, self.aliases, self.depth = name, 0, 0
        self.as_text: set[int] = set()  # scalars tagged !!str

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise at(self.name, event.start_mark, f"has more than {MAX_ALIASES} aliases (*name)")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise at(self.name, event.start_mark, f"nests more than {MAX_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_scalar_node(self, anchor):
        tagged = self._explicit_tag(("!", _STR))
        node = super().compose_scalar_node(anchor)
        if tagged:
            self.as_text.add(id(node))
        return node

    def compose_sequence_node(self, anchor):
        self._explicit_tag(("!", _TAG + "seq"))
        return super().compose_sequence_node(anchor)

    def compose_mapping_node(self, anchor):
        self._explicit_tag(("!", _TAG + "map"))
        return super().compose_mapping_node(anchor)

    def _explicit_tag(self, allowed: tuple[str, ...]) -> bool:
        """Whether the next node is tagged (with one of `allowed`; any other tag is refused)."""
        event = self.peek_event()
        if event.tag is not None and event.tag not in allowed:
            raise at(self.name, event.start_mark, f"has the tag {event.tag!r}, which the Pulumi CLI reads "
                     "otherwise or not at all; write the value without a tag")
        return event.tag is not None


def _expanded_size(node: Node, name: str, sizes: dict[int, int], open_: set[int]) -> int:
    """How many nodes `node` stands for once every alias is expanded (memoized: milliseconds for a bomb)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise at(name, node.start_mark, "refers to itself through an alias")
    open_.add(key)
    size = 1
    if isinstance(node, SequenceNode):
        size += sum(_expanded_size(child, name, sizes, open_) for child in node.value)
    elif isinstance(node, MappingNode):
        size += sum(_expanded_size(k, name, sizes, open_) + _expanded_size(v, name, sizes, open_)
                    for k, v in node.value)
    open_.discard(key)
    if size > MAX_NODES:
        raise at(name, node.start_mark, f"expands to more than {MAX_NODES} values through its aliases")
    sizes[key] = size
    return size


def cli_plain(text: str) -> Any:
    """What yaml.v3 (the Pulumi CLI's YAML) makes of a plain scalar decoded into an `any` (resolve.go
    `resolve`): a bool, None, an int, a float, or _TEXT."""
    hint = _HINTS.get(text[:1], "N" if text == "" else None)
    if hint is None:
        return _TEXT
    if text in _V3_WORDS:
        return _V3_WORDS[text]
    if hint == ".":
        return float(text) if re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text) else _TEXT
    if hint not in "DS":
        return _TEXT
    if _DATE.fullmatch(text):
        return _A_DATE  # a time.Time, which Pulumi turns into other text
    plain = text.replace("_", "")
    found = _GO_INT.fullmatch(plain)
    if found:
        digits, base = next((found[g], b) for g, b in (("hex", 16), ("oct", 8), ("bin", 2), ("old", 8), ("dec", 10))
                            if found[g] is not None)
        value = int(digits, base) * (-1 if found["sign"] == "-" else 1)
        if -(2 ** 63) <= value < 2 ** 64:
            return value
    if _V3_FLOAT.fullmatch(plain):
        value = float(plain)
        return value if math.isfinite(value) else _TEXT
    return _TEXT


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


class _Values:
    """Plain Python values from the composed nodes, by the rules above."""

    def __init__(self, loader: _Loader, name: str):
        self.loader, self.name = loader, name

    def refuse(self, node: Node, what: str) -> StackFileError:
        return at(self.name, node.start_mark, what)

    def of(self, node: Node) -> Any:
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        if isinstance(node, SequenceNode):
            return [self.of(child) for child in node.value]
        return self.mapping(node)

    def scalar(self, node: ScalarNode) -> Any:
        if node.style is not None or id(node) in self.loader.as_text:
            return node.value  # quoted, a block scalar or tagged !!str: text to both
        if node.tag == _MERGE:
            raise self.refuse(node, "has `<<` as a value; quote it ('<<') for the text")
        cli = cli_plain(node.value)
        if node.tag in (_NULL, _BOOL, _INT, _FLOAT):
            ours = self.loader.construct_object(node)
        elif node.tag.endswith("timestamp"):
            ours = _A_DATE
        else:  # text (or YAML 1.1's `=`, text to the CLI)
            ours = node.value
            if cli is _TEXT:
                return ours
        if ours is not _A_DATE and _same(ours, cli):
            if isinstance(ours, (int, float)) and not isinstance(ours, bool) and not _DECIMAL.fullmatch(node.value):
                raise self.refuse(node, f"{node.value!r} is the number {ours!r} written otherwise than in decimals: "
                                  f"write {ours!r}, or quote it for the text")
            return ours
        raise self.refuse(node, self._differs(node.value, ours, cli, node.tag))

    @staticmethod
    def _differs(text: str, ours: Any, cli: Any, tag: str) -> str:
        if tag == _BOOL and cli is _TEXT:
            word = "true" if ours else "false"
            return (f"{text!r} is a YAML 1.1 boolean, which the Pulumi CLI (YAML 1.2) reads as the text {text!r}: "
                    f"write {word} for a boolean, or quote it ('{text}') for the text")
        if _A_DATE in (ours, cli):
            return f"{text!r} reads as a date, which the Pulumi CLI turns into other text: quote it ('{text}')"

        def shown(value: Any) -> str:
            return "text" if value is _TEXT or isinstance(value, str) else f"the {type(value).__name__} {value!r}"

        return (f"{text!r} reads as {shown(ours)} in YAML 1.1 but as {shown(cli)} to the Pulumi CLI (YAML 1.2): "
                "write a plain decimal number, true or false, or quote it for the text")

    def key(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise self.refuse(node, "has a key that is a list or a mapping; a key is text")
        value = self.scalar(node)
        if not isinstance(value, str):
            raise self.refuse(node, f"has the key {node.value}, which is not text: write it quoted, \"{node.value}\"")
        return value

    def mapping(self, node: MappingNode) -> dict[str, Any]:
        own: dict[str, tuple[Node, Any]] = {}
        merges: list[tuple[Node, MappingNode]] = []
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == _MERGE and key_node.style is None:
                if merges:
                    raise self.refuse(key_node, f"has a second `<<` (the first on line {merges[0][0].start_mark.line + 1})")
                merges = [(key_node, m) for m in self._merged(key_node, value_node)]
                continue
            key = self.key(key_node)
            if key in own:
                first = own[key][0].start_mark.line + 1
                raise self.refuse(key_node, f"has the key {key!r} twice (first on line {first}); the Pulumi CLI "
                                  "refuses a duplicate key: keep one")
            own[key] = (key_node, self.of(value_node))
        values = {k: v for k, (_, v) in own.items()}
        from_merges: dict[str, int] = {}
        for merge_key, merged in merges:
            for key, value in self.mapping(merged).items():
                if key in values or key in from_merges:
                    raise self.refuse(merge_key, f"merges the key {key!r}, which this mapping or another merge "
                                      "sets too: which one wins is not plain to read; write it once")
                from_merges[key] = merged.start_mark.line + 1
                values[key] = value
        return values

    def _merged(self, key: Node, value: Node) -> list[MappingNode]:
        mappings = value.value if isinstance(value, SequenceNode) else [value]
        if not all(isinstance(m, MappingNode) for m in mappings):
            raise self.refuse(key, "merges (`<<`) something that is not a mapping or a list of mappings")
        return mappings
