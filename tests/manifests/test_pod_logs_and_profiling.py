"""Where a run's logs go (its profiles prefix, always) and what `profile: true` adds."""

from __future__ import annotations

import pytest

from tests.manifests.test_manifests import CASES, trainer
from core.trainers import TRAINERS
from manifests import storage
from tests.support import examples
from manifests.run import build_run
from stack.runs import RunConfig, run_problems

LOG_FLAG = {"gemma-jax": "--log_dir", "trl-gpu": "--logging_dir"}
XPROF_FLAGS = ("--profile_steps", "--xprof_port")
TPU_RUN = examples.RUNS[1]  # gemma-jax on v6e-2x4, declared without profile
GPU_RUN = examples.RUNS[3]


def flag_value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


def build(run: RunConfig) -> dict:
    return build_run(run, examples.CONTRACTS[run.pool], examples.FACTS)


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_every_run_logs_into_its_profiles_mount(stack, run, contract, manifest):
    container = trainer(manifest)
    if run.trainer is None:  # one's own container: told where by its environment
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["GKE_FINETUNE_PROFILES"] == storage.PROFILE_DIR
    else:
        assert flag_value(container["args"], LOG_FLAG[run.trainer]) == storage.PROFILE_DIR
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == storage.PROFILE_DIR]
    assert mount["readOnly"] is False


@pytest.mark.parametrize("stack,run,contract,manifest", CASES)
def test_xprof_flags_and_port_only_for_a_profiled_gemma_jax_run(stack, run, contract, manifest):
    container = trainer(manifest)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    if run.profile and run.trainer == "gemma-jax":
        assert flag_value(container["args"], "--profile_steps") == TRAINERS["gemma-jax"].profile_args[1]
        assert flag_value(container["args"], "--xprof_port") == str(TRAINERS["gemma-jax"].profile_port.number)
        assert ports["xprof"] == TRAINERS["gemma-jax"].profile_port.number
    else:
        assert not set(XPROF_FLAGS) & set(container["args"])
        assert "xprof" not in ports


def test_profile_adds_the_xprof_flags_and_nothing_else():
    plain = trainer(build(TPU_RUN))
    profiled = trainer(build(TPU_RUN.model_copy(update={"profile": True})))
    added = [a for a in profiled["args"] if a not in plain["args"]]
    assert added == ["--profile_steps", TRAINERS["gemma-jax"].profile_args[1], "--xprof_port", str(TRAINERS["gemma-jax"].profile_port.number)]
    assert profiled["volumeMounts"] == plain["volumeMounts"]
    assert {p["name"] for p in profiled["ports"]} == {"tpu-runtime", "xprof"}
    assert {p["name"] for p in plain["ports"]} == {"tpu-runtime"}


def test_profile_is_refused_on_a_trl_gpu_run_with_the_key_and_what_is_allowed():
    runs = [examples.RUNS[0], GPU_RUN.model_copy(update={"profile": True})]
    [message] = [str(p) for p in run_problems(runs, examples.CONTRACTS)]
    assert message.startswith("runs[1].profile: true on run 'gemma4-sql-a4'")
    assert "trainer trl-gpu has no profiler flag" in message
    assert "allowed: false" in message and "gemma-jax" in message
    assert [str(p) for p in run_problems([GPU_RUN], examples.CONTRACTS)] == []


@pytest.mark.parametrize("flag", XPROF_FLAGS)
def test_xprof_flags_in_args_are_refused(flag):
    run = TPU_RUN.model_copy(update={"args": (f"{flag}=1",)})
    [message] = [str(p) for p in run_problems([run], examples.CONTRACTS)]
    assert f"flag {flag} is set by the platform for `profile: true`" in message
