"""The plan's model-memory section: what admission refuses a run on, shown for every run."""

from __future__ import annotations

from tools.plan.collect import collect
from tools.plan.memory import render_memory


def test_each_run_s_model_against_its_pool_s_chips():
    queued = {r["run"]: r for r in collect("tpu-queued")["model_memory"]}
    assert queued["own-container"] == {"run": "own-container", "state": "own container"}
    ladder = queued["gemma3-ladder"]
    assert (ladder["model"], ladder["offered_gib"], ladder["fits"]) == ("gemma3-270m", 31.24, True)
    assert ladder["how"].startswith("the TPU compiler's figure")
    gpu, served = collect("a4")["model_memory"]
    # The a4 stack's model server: the run's model on the same chips, judged the same way.
    assert served["run"] == "serve gemma4-sql" and served["model"] == "gemma4-31b" and served["fits"]
    assert gpu["model"] == "gemma4-31b" and gpu["fits"] and gpu["host_needed_gib"] < gpu["host_offered_gib"]
    text = "\n".join(render_memory([gpu, {**ladder, "fits": False, "needed_gib": 40.0}]))
    assert "host memory to load it: 457 GiB of the container's 3772 GiB" in text
    assert text.count("DOES NOT FIT") == 1
