"""The images stack: both trainers' runs on an existing cluster, their images built and pushed by `pulumi up`.

The dev stack's run and dataset and the a4 stack's, as a stack for the
control plane's cluster (engine.py `existing_cluster_values`) that builds its
images: `imageBuild` names the registry on 127.0.0.1 (docker_engine.py), the
host's network for the Dockerfiles' RUN steps (the engine has no bridge), the
Docker context's own builder (`default`: the engine's embedded BuildKit, which
uses the local base image stand-ins without pulling them), through the buildx
CLI plugin (`exec`: the provider's embedded client picks a `docker-container`
builder on this Docker 20.10 engine, whose BuildKit image no registry here has).

`Delivery` is what the tests read it through: the stack's exports, the runs'
JobSets as the API server has them, the registry's digests and layers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from core.dockerfile import TRAINER_IMAGES, content_tag
from e2e.harness.docker_engine import Engine as DockerEngine
from e2e.harness.engine import Engine, existing_cluster_values
from e2e.harness.kube import Kube
from e2e.harness.tools import ROOT

PREFIX = "gke-finetune:"
REPOSITORY = "finetune"
STACK = "existing-images"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
# An `up` that builds both images cold downloads and installs every package and pushes some
# 10 GB to the registry: about 20 minutes on 2 cores. With the engine's cache, seconds.
UP_TIMEOUT = 2400.0


BOTH_REGION, BOTH_ZONE = "us-central1", "us-central1-b"


def combined_config() -> dict:
    """The dev stack's config with the a4 stack's pools, datasets and runs added: both trainers."""
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    a4 = yaml.safe_load((ROOT / "Pulumi.a4.yaml").read_text())["config"]
    out = dict(dev)
    for key in ("pools", "datasets", "runs"):
        out[PREFIX + key] = [*dev.get(PREFIX + key, []), *a4.get(PREFIX + key, [])]
    # A region offering both TPU v6e and B200, in one zone (core/offerings.py).
    out.update({"gcp:region": BOTH_REGION, PREFIX + "zones": [BOTH_ZONE]})
    return out


def platform_overrides() -> str:
    """The combined pools, datasets and runs as stack_objects' overrides (the platform's nodes)."""
    config = combined_config()
    overrides = {PREFIX + k: config[PREFIX + k] for k in ("pools", "datasets", "runs", "zones")}
    return json.dumps({**overrides, "gcp:region": config["gcp:region"]})


def images_config(kubeconfig: str, registry: str) -> dict:
    """The stack file of the images stack: built images pushed to `registry` (host:port)."""
    config = existing_cluster_values(combined_config(), kubeconfig)
    config.pop(PREFIX + "images")
    config[PREFIX + "imageBuild"] = {"registry": f"{registry}/{REPOSITORY}", "network": "host",
                                     "builder": "default", "exec": True}
    return config


def trainer_of(manifest: dict) -> str:
    """The trainer whose image a JobSet's or a Job's pods run."""
    images = re.findall(r'"image": "([^"]+)"', json.dumps(manifest))
    return next(t for t, i in TRAINER_IMAGES.items() if any(f"/{i.image_name}@" in image for image in images))


def pod_spec(jobset: dict) -> dict:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


@dataclass
class Delivery:
    engine: Engine
    docker: DockerEngine
    kube: Kube
    namespace: str
    runs: dict[str, str]  # run name -> trainer
    owners: dict[str, str]  # Pulumi name of every object that runs an image (runs, staging Jobs) -> trainer
    pushed: dict[str, list[str]] = field(default_factory=dict)  # trainer -> its digests, in order
    report: list[str] = field(default_factory=list)

    @property
    def program(self) -> Path:
        return self.engine.workdir

    def repository(self, trainer: str) -> str:
        return f"{REPOSITORY}/{TRAINER_IMAGES[trainer].image_name}"

    def exports(self) -> dict[str, str]:
        return json.loads(self.engine.run("stack", "output", "images", "--json").stdout)

    def ensure_up(self) -> dict[str, str]:
        """The images exported by the stack, after an `up` if none has run yet."""
        if not any(s.command.startswith("up") and s.returncode == 0 for s in self.engine.steps):
            self.engine.run("up", "--yes", "--skip-preview", timeout=UP_TIMEOUT)
        return self.exports()

    def jobsets(self) -> dict[str, dict]:
        return {run: self.kube.get(JOBSET_API, "JobSet", run, self.namespace) for run in self.runs}

    def jobset_images(self) -> dict[str, tuple[str, str]]:
        """Each run's (image, uid) as the API server has its JobSet."""
        return {run: (pod_spec(js)["containers"][0]["image"], js["metadata"]["uid"])
                for run, js in self.jobsets().items()}

    def registry_digest(self, trainer: str) -> str:
        """The registry's digest of the trainer's image at the content tag of the program's tree."""
        return self.docker.registry.digest(self.repository(trainer),
                                           content_tag(TRAINER_IMAGES[trainer], self.program))

    def layers(self, trainer: str, digest: str) -> list[dict]:
        return self.docker.registry.layers(self.repository(trainer), digest)
