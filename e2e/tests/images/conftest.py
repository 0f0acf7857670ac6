"""The images stack's control plane, Docker engine and registry, shared by this package's tests and stopped after them."""

from __future__ import annotations

import pytest

from e2e.harness import base_images, docker_engine
from e2e.harness.delivery import STACK, Delivery, images_config, platform_overrides, trainer_of
from e2e.harness.engine import engine
from e2e.harness.install import install_stack
from e2e.harness.session import control_plane
from e2e.harness.stack_objects import stack_objects
from e2e.tests.settings import LIFETIME
from e2e.tests.reports import Report

IMAGES_REPORT = Report("images")


@pytest.fixture(scope="package")
def delivery(state_root):
    """The images stack (e2e/harness/delivery.py) on a control plane with a Docker engine and a registry,
    through the real CLI and the docker-build provider; its first `up` is the first test's."""
    objects = stack_objects("dev", overrides_json=platform_overrides())
    with control_plane(state_root / "images", LIFETIME) as cp:
        kube = cp.client()
        install_stack(cp, kube, objects, platform_only=True)
        docker = docker_engine.start(cp.supervisor, cp.tools, cp.state / "docker")
        try:
            stand_ins = base_images.ensure(docker.cli, cp.supervisor.logs / "stand-ins.log")
            made = engine(cp.tools, state_root / "images" / "pulumi", STACK, cp.kubeconfig,
                          extra_env=docker.env)
            made.write_stack(images_config(str(cp.kubeconfig), docker.registry.host))
            runs = {r["metadata"]["name"]: trainer_of(r) for r in objects.manifests("JobSet")}
            owners = {s.name: trainer_of(s.manifest) for s in objects.steps
                      if s.manifest and s.manifest["kind"] in ("JobSet", "Job")}
            found = Delivery(made, docker, kube, objects.runs_namespace, runs, owners)
            found.report.append("== base image stand-ins: " + ", ".join(f"{t} {d}" for t, d in stand_ins.items()))
            yield found
            IMAGES_REPORT.extend(found.report)
            IMAGES_REPORT.append("== images stack through pulumi: "
                                 + ", ".join(f"{s.command.split()[0]} {s.seconds:.1f}s" for s in made.steps))
        finally:
            docker.remove_containers()
