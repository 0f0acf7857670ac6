"""The whole program (under the SDK's mocks) with a run that mixes two local datasets: both are uploaded,
the JobSet's trainer gets `--data_mix` with each source where the pod mounts datasets/<stack>/, and a bad
first row of either source is refused before anything is declared."""

from __future__ import annotations

import json

from stack.problems import ConfigError
from tests.support.checkout import linked_checkout
from tests.support.pulumi_harness import declared_before_error, run_stack
from trainers.sft_data import mixture

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CHAT = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
SHARED = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello."}]}


def _overrides(tree, shared_rows):
    for name, rows in (("chats.jsonl", [CHAT] * 3), ("shared.jsonl", shared_rows)):
        path = tree / "data" / "local" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mix = [{"data": "local/chats.jsonl", "weight": 2, "format": "conversational"},
           {"data": "local/shared.jsonl", "weight": 1, "format": "sharegpt"}]
    return {"gke-finetune:datasets": [{"name": "local", "path": "data/local"}],
            "gke-finetune:runs": [{"name": "mixed", "trainer": "gemma-jax", "pool": "v6e-1x1", "mix": mix,
                                   "args": ["--batch_size", "32"]}]}


def test_a_mixing_run_reads_each_source_where_the_pod_mounts_it(tmp_path):
    tree = linked_checkout(tmp_path)
    deployed = run_stack("dev", root=tree, overrides=_overrides(tree, [SHARED] * 3))
    [jobset] = deployed.of_type(JOBSET)
    args = jobset.inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    sources = mixture.parse(args[args.index("--data_mix") + 1], "completion")
    assert [(s.path, s.weight, s.spec.format) for s in sources] == [
        ("/data/local/chats.jsonl", 2.0, "conversational"), ("/data/local/shared.jsonl", 1.0, "sharegpt")]
    assert "--data_path" not in args


def test_a_bad_first_row_of_a_source_is_refused_before_anything_is_declared(tmp_path):
    tree = linked_checkout(tmp_path)
    bad = {"conversations": [{"from": "bot", "value": "Hi"}]}
    declared, err = declared_before_error("dev", root=tree, overrides=_overrides(tree, [SHARED, bad]))
    assert isinstance(err, ConfigError) and declared.resources == []
    assert any(p.startswith("runs[0].mix[1].data: 'local/shared.jsonl' on run 'mixed' (format sharegpt): "
                            "local/shared.jsonl:2: column 'conversations' turn 0 is from 'bot'") for p in err.problems), \
        err.problems
