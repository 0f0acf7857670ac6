"""jax.distributed's own cluster detection on the environment a shipped TPU run's pods get on GKE.

Each pod of a multi-host run gets, from three places: the run manifest's own
env (tests/golden, with its fieldRefs resolved from the labels the JobSet
controller puts on every pod: `jobset.sigs.k8s.io/job-index` is the slice,
`jobset.sigs.k8s.io/replicatedjob-replicas` the number of slices); from
GKE's TPU webhook, for an Indexed Job with a subdomain that requests
google.com/tpu, `TPU_WORKER_ID` (the pod's completion index) and
`TPU_WORKER_HOSTNAMES` (every pod of its slice, ordered by index)
(https://cloud.google.com/kubernetes-engine/docs/how-to/tpus, "TPU_WORKER_ID
... TPU_WORKER_HOSTNAMES"); and from the Job controller, the hostname
`<job>-<index>` under the JobSet's subdomain
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode).
jax's GkeTpuCluster (jax/_src/clusters/cloud_tpu_cluster.py) must then give
every pod of every slice its own process id, the same process count, and the
same coordinator: the pod with process id 0. Only the "am I on a TPU VM"
probe and the coordinator's DNS wait are replaced (no TPU VM, no cluster
DNS), and the metadata server: a variable missing from the pod's env
(a single-slice pod has no MEGASCALE_*) is asked of the VM's `tpu-env`
metadata attribute; here it has none, so jax's one-slice defaults apply.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from gemma_jax_helpers import REPO, cpu_env

GOLDEN = pathlib.Path(REPO) / "tests" / "golden"
# The shipped multi-host runs, and one's own container on a multi-host slice and on two (the examples).
MULTI_HOST = ["tpu-multihost/gemma3-multi-host", "tpu-multislice/gemma3-multislice",
              "tpu-queued/gemma3-ladder", "examples/own-jax", "examples/own-jax-x2"]

DETECT = """
import json, os, sys
from jax._src.clusters import cloud_tpu_cluster as c
c.running_in_cloud_tpu_vm = True
c.BaseTpuCluster.wait_for_coordinator = classmethod(lambda cls, address, timeout: None)
asked = []
c.get_tpu_env_value_from_metadata = lambda key: asked.append(key)  # a metadata server without tpu-env
from trainers.gemma_jax import sharding
out = []
for env in json.loads(sys.stdin.read()):
    os.environ.clear(); os.environ.update(env)
    cluster = c.GkeTpuCluster
    out.append({"present": cluster.is_env_present(),
                "wanted": any(os.environ.get(k) for k in sharding._CLUSTER_ENV),
                "count": cluster.get_process_count(), "id": cluster.get_process_id(),
                "coordinator": cluster.get_coordinator_address(None, None), "asked": sorted(set(asked))})
    asked.clear()
print(json.dumps(out))
"""


def _resolve(env: list[dict], labels: dict[str, str]) -> dict[str, str]:
    out = {}
    for var in env:
        if "value" in var:
            out[var["name"]] = var["value"]
            continue
        path = var["valueFrom"]["fieldRef"]["fieldPath"]
        label = path.removeprefix("metadata.labels['").removesuffix("']")
        out[var["name"]] = labels[label]
    return out


def pod_envs(key: str) -> tuple[list[dict[str, str]], list[str]]:
    """(env of every pod, its hostname) of a golden run, slice by slice, index by index."""
    manifest = yaml.safe_load((GOLDEN / f"{key}.yaml").read_text())
    name, subdomain = manifest["metadata"]["name"], manifest["spec"]["network"]["subdomain"]
    (rjob,) = manifest["spec"]["replicatedJobs"]
    slices, per_slice = rjob.get("replicas", 1), rjob["template"]["spec"]["parallelism"]
    env = rjob["template"]["spec"]["template"]["spec"]["containers"][0].get("env", [])
    envs, hosts = [], []
    for s in range(slices):
        job = f"{name}-{rjob['name']}-{s}"
        workers = [f"{job}-{i}.{subdomain}" for i in range(per_slice)]
        labels = {"jobset.sigs.k8s.io/job-index": str(s), "jobset.sigs.k8s.io/replicatedjob-replicas": str(slices)}
        for i in range(per_slice):
            envs.append({**_resolve(env, labels), "TPU_WORKER_ID": str(i), "TPU_WORKER_HOSTNAMES": ",".join(workers)})
            hosts.append(workers[i])
    return envs, hosts


@pytest.mark.parametrize("key", MULTI_HOST)
def test_every_pod_gets_its_own_process_and_one_coordinator(key):
    envs, hosts = pod_envs(key)
    assert len(envs) > 1
    done = subprocess.run([sys.executable, "-c", DETECT], input=json.dumps(envs), cwd=REPO,
                          env=cpu_env(1), capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(p["present"] and p["wanted"] for p in seen), seen
    assert {p["count"] for p in seen} == {len(envs)}
    assert [p["id"] for p in seen] == list(range(len(envs))), "process ids in slice, then pod order"
    (coordinator,) = {p["coordinator"] for p in seen}
    assert coordinator.split(":")[0] == hosts[0], (coordinator, hosts[0])
    slices = len({e.get("MEGASCALE_SLICE_ID", "0") for e in envs})
    # What jax would ask the metadata server for: nothing a multislice pod's env lacks.
    assert {tuple(p["asked"]) for p in seen} == ({()} if slices > 1 else {
        ("MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID")})


def test_a_multislice_pod_names_the_first_slice_s_first_pod_as_coordinator():
    envs, hosts = pod_envs("tpu-multislice/gemma3-multislice")
    assert {e["MEGASCALE_NUM_SLICES"] for e in envs} == {"2"}
    assert [e["MEGASCALE_SLICE_ID"] for e in envs] == ["0", "0", "1", "1"]
    assert {e["MEGASCALE_COORDINATOR_ADDRESS"] for e in envs} == {hosts[0]}
