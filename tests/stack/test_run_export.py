"""A run's `export:` and `eval:`: each bad input refused before anything is declared, naming the key,
the value and what is allowed; what a good one puts in its JobSet (the export prefix mounted, the
trainer's flags) and in the stack's grants (the run writes its export prefix)."""

from __future__ import annotations

import pytest

from components.storage import prefix_condition, run_writes
from core.names import BucketLayout, export_prefix
from manifests.run import build_runs
from stack.run_export import EvalConfig, ExportConfig
from stack.runs import RunConfig, run_problems
from tests.support import examples

CONTRACTS = examples.CONTRACTS
JAX = RunConfig(name="tuned", trainer="gemma-jax", pool="v6e-1x1", data="stories.txt")


def problems(run: RunConfig) -> list[str]:
    return [str(p) for p in run_problems([run], CONTRACTS)]


def with_(run: RunConfig, **update) -> RunConfig:
    return RunConfig.model_validate({**run.model_dump(by_alias=True), **update})


@pytest.mark.parametrize("update, expected", [
    ({"export": {"format": "gguf"}},
     "runs[0].export.format: 'gguf' on run 'tuned' is not an export format; allowed: huggingface"),
    ({"export": {"dtype": "int8"}},
     "runs[0].export.dtype: 'int8' on run 'tuned' is not a dtype the export writes; allowed: bfloat16 | float16 | float32"),
    ({"export": {"merge": False}},
     "runs[0].export.merge: false on run 'tuned': trainer gemma-jax writes merged weights only; allowed: true"),
    ({"eval": {"samples": 2}},
     "runs[0].eval: {'samples': 2, 'prompts': (), 'maxNewTokens': 256, 'compareBase': True, 'metric': 'auto'} on "
     "run 'tuned': eval.json is written beside the export, and the run has no `export`; allowed: `export: {format: "
     "huggingface}` beside `eval`"),
    ({"export": {}, "eval": {"metric": "bleu"}},
     "runs[0].eval.metric: 'bleu' on run 'tuned' is not a metric; allowed: auto | none | sql-execution"),
    ({"export": {}, "eval": {"metric": "sql-execution"}},
     "runs[0].eval.metric: 'sql-execution' on run 'tuned': trainer gemma-jax does not compute it; allowed: auto | none"),
    ({"export": {}, "eval": {"samples": 4}},
     "runs[0].eval.samples: 4 on run 'tuned': trainer gemma-jax has no held-out prompts to generate (its held-out "
     "split is packed token rows); allowed: 0, and the prompts to try in `eval.prompts`"),
    ({"export": {}, "eval": {"prompts": ["  "]}},
     "runs[0].eval.prompts[0]: '  ' on run 'tuned' is blank; allowed: a prompt with text"),
    ({"args": ["--export_hf", "/x"]},
     "runs[0].args: '--export_hf' on run 'tuned': flag --export_hf is set from the run's `export` and `eval`; "
     "allowed: `export` and `eval` instead"),
])
def test_each_bad_export_or_eval_is_one_clear_problem(update, expected):
    assert problems(with_(JAX, **update)) == [expected]


def test_an_export_on_a_run_of_one_s_own_container_is_refused():
    own = RunConfig(name="own", pool="v6e-1x1", image="r/p/i@sha256:" + "a" * 64, command=("x",),
                    export=ExportConfig())
    found = problems(own)
    assert any(p.startswith("runs[0].export: ") and "no export on a run without trainer" in p for p in found), found


def test_an_exporting_run_mounts_its_prefix_and_passes_the_trainer_its_flags():
    run = with_(JAX, export={"dtype": "float16"}, eval={"prompts": ["Once"], "compareBase": False})
    facts = examples.FACTS.__class__(**{**examples.FACTS.__dict__, "exports": {run.name: export_prefix("s", run.name)}})
    spec = build_runs([run], CONTRACTS, facts)[run.name]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert args[args.index("--export_hf") + 1] == "/exports" and args[args.index("--export_dtype") + 1] == "float16"
    assert args[args.index("--eval_prompts") + 1] == '["Once"]' and "--eval_samples" not in args
    assert args[args.index("--eval_compare_base") + 1] == "false"
    volume = next(v for v in spec["volumes"] if v["name"] == "exports")
    assert volume["csi"]["volumeAttributes"]["mountOptions"].endswith("only-dir=exports/s/tuned")
    assert not volume["csi"]["readOnly"]


def test_a_run_without_export_mounts_no_export_prefix():
    spec = build_runs([JAX], CONTRACTS, examples.FACTS)[JAX.name]["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert "exports" not in {v["name"] for v in spec["template"]["spec"]["volumes"]}


def test_the_run_s_grant_covers_its_export_prefix_and_no_other_stack_s():
    layout = BucketLayout("team-a")
    condition = prefix_condition("b", run_writes(layout, "tuned", {"tuned": export_prefix("team-a", "tuned")}))
    assert 'objects/exports/team-a/tuned/")' in condition and "team-b" not in condition
    assert "exports" not in prefix_condition("b", run_writes(layout, "tuned"))


def test_the_defaults_are_those_pulumi_yaml_documents():
    assert ExportConfig().model_dump() == {"format": "huggingface", "merge": True, "dtype": "bfloat16"}
    assert EvalConfig().samples == 8 and EvalConfig().max_new_tokens == 256 and EvalConfig().compare_base
