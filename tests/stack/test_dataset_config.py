"""`datasets:`: sources, tokenization and the runs that read them, each bad input named by its key."""

import pytest

from stack.config import StackConfig
from stack.problems import ConfigError

POOL = {"name": "p", "accelerator": "tpu-v6e", "topology": "1x1"}
BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"], "pools": [POOL]}
TINY = {"name": "tinystories", "url": "https://example.com/data/TinyStories-train.txt", "tokenize": "gemma3-270m"}


def config(datasets, runs=()):
    return StackConfig.from_mapping({**BASE, "datasets": datasets, "runs": list(runs)})


def problems(datasets, runs=()) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config(datasets, runs)
    return err.value.problems


def run(data, trainer="gemma-jax"):
    return {"name": "r", "trainer": trainer, "pool": "p", "data": data}


def test_a_jax_run_reads_the_token_shards_of_a_tokenized_dataset():
    assert config([TINY], [run("tinystories")]).data_paths() == {"r": "tinystories/tokens"}


def test_a_path_inside_a_dataset_is_read_as_given():
    assert config([TINY], [run("tinystories/TinyStories-train.txt")]).data_paths() == {
        "r": "tinystories/TinyStories-train.txt"}


def test_a_dataset_without_tokenize_is_read_as_its_file():
    plain = {k: v for k, v in TINY.items() if k != "tokenize"}
    assert config([plain], [run("tinystories")]).data_paths() == {"r": "tinystories/TinyStories-train.txt"}


def test_the_source_spec_is_what_the_staging_code_takes():
    hub = config([{"name": "sql", "hub": {"id": "org/sql", "revision": "abc123", "split": "train"}}]).datasets[0]
    assert hub.source_spec() == {"kind": "hub", "id": "org/sql", "revision": "abc123", "split": "train"}
    gcs = config([{"name": "mine", "gcs": "gs://other-bucket/corpora/v2"}]).datasets[0]
    assert (gcs.gcs_bucket, gcs.gcs_prefix, gcs.source_spec()) == ("other-bucket", "corpora/v2",
                                                                    {"kind": "mounted", "path": "/source"})


@pytest.mark.parametrize("datasets, runs, expected", [
    ([TINY], [run("wikitext")], "runs[0].data: 'wikitext' on run 'r' names no dataset of the stack"),
    ([], [run("TinyStories-train.txt")], "runs[0].data: 'TinyStories-train.txt' on run 'r' names no dataset"),
    ([TINY, TINY], [], "datasets[1].name: 'tinystories' is used twice"),
    ([{"name": "x"}], [], "datasets[0].url: not set, and no hub, gcs or path either: a dataset needs a source"),
    ([{"name": "x", "url": "https://a/b.txt", "gcs": "gs://b/p"}], [],
     "datasets[0].gcs: 'gs://b/p' is a second source beside url"),
    ([{"name": "x", "url": "ftp://a/b.txt"}], [], "datasets[0].url: 'ftp://a/b.txt' is not an http(s) URL"),
    ([{"name": "x", "url": "https://a/b.txt", "sha256": "abc"}], [], "datasets[0].sha256: 'abc' is not a SHA-256"),
    ([{"name": "x", "gcs": "s3://b/p"}], [], "datasets[0].gcs: 's3://b/p' is not a gs:// prefix"),
    ([{"name": "x", "hub": {"id": "no-owner"}}], [], "datasets[0].hub.id: 'no-owner' is not a Hub dataset id"),
    ([{"name": "x", "hub": {"id": "o/n"}, "tokenize": "gemma3-270m"}], [], "datasets[0].tokenize: 'gemma3-270m' needs"),
    ([{**TINY, "tokenize": "gemma9"}], [], "datasets[0].tokenize: 'gemma9' is refused by the trainer: --model"),
    ([{"name": "Tiny_Stories", "url": "https://a/b.txt"}], [], "datasets[0].name: 'Tiny_Stories'"),
    ([{**TINY, "mirror": "x"}], [], "datasets[0].mirror: 'x' is an unknown key"),
])  # fmt: skip
def test_bad_datasets_are_rejected_naming_the_key(datasets, runs, expected):
    lines = problems(datasets, runs)
    assert any(line.startswith(expected) for line in lines), lines
