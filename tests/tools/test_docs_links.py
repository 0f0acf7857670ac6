"""Every link of README.md and docs/ to a file of the repository reaches it, and a `#section` to one of
its headings, named as GitHub names a heading's anchor (lower case, spaces to hyphens, punctuation but
hyphens and underscores dropped)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doc_commands import doc_files
from tools.offline import ROOT

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in _LINK.findall(_FENCE.sub("", path.read_text())):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{path.name}: {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{path.name}: {target}: no heading with that anchor in {linked.name}")
    return problems


def test_every_link_of_the_readme_and_docs_reaches_a_file_and_a_heading():
    problems = [p for path in doc_files(ROOT) for p in broken_links(path)]
    assert problems == [], "\n".join(problems)


def test_the_anchors_are_github_s():
    assert {"before-the-first-make-up-make-doctor", "where-is-my-run-make-status"} <= anchors(ROOT / "docs" / "runs.md")
    assert "the-google-cloud-half-by-googles-own-api-definitions" in anchors(ROOT / "docs" / "development.md")


def test_a_missing_file_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section (`make x`)\n")
    (tmp_path / "README.md").write_text("[ok](other.md#a-section-make-x) [file](gone.md) [anchor](other.md#nope) "
                                        "[web](https://example.com/x)\n```\n[in a block](gone.md)\n```\n")
    assert broken_links(tmp_path / "README.md") == ["README.md: gone.md: no such file",
                                                    "README.md: other.md#nope: no heading with that anchor in other.md"]
