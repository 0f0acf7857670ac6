"""The trainer's entry point (trainers.trl_gpu.sft) with accelerate's backend
and device chosen for a machine without GPUs, so that the shipped FSDP config
runs through accelerate's own FSDP2 code on CPU (fsdp_cpu.py launches it).

accelerate picks FSDP only for an accelerator's distributed type: on a CPU it
settles on DistributedType.NO, or MULTI_CPU with --cpu, and never prepares
FSDP (accelerate/state.py: PartialState._prepare_backend, then
AcceleratorState.__init__ sets FSDP only for MULTI_GPU and its kin). Two
things change here and nothing else:

- the backend: where accelerate finds no accelerator in a launched worker,
  it gets gloo under the MULTI_GPU distributed type, so AcceleratorState turns
  it into FSDP with the config's plugin;
- the device: ACCELERATE_TORCH_DEVICE=cpu, which PartialState reads at start
  and set_device keeps (instead of torch.cuda.set_device).

Everything after that (fsdp2_prepare_model, the Trainer's sharded saves and
loads, the trainer's own code) is the pinned libraries' code as on the GPUs.
"""

from __future__ import annotations

import os
import sys

os.environ["ACCELERATE_TORCH_DEVICE"] = "cpu"

from accelerate import state  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

_prepare_backend = state.PartialState._prepare_backend


def _gloo_in_place_of_an_accelerator(self, cpu: bool = False, sagemaker_dp=False, backend: str | None = None):
    chosen, distributed_type = _prepare_backend(self, cpu, sagemaker_dp, backend)
    if distributed_type == DistributedType.NO and int(os.environ.get("LOCAL_RANK", -1)) != -1:
        return "gloo", DistributedType.MULTI_GPU
    return chosen, distributed_type


state.PartialState._prepare_backend = _gloo_in_place_of_an_accelerator

if __name__ == "__main__":
    from trainers.trl_gpu.sft import main

    sys.exit(main())
