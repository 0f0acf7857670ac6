"""The trainer images built, pushed and delivered for real, through the real docker-build provider.

One control plane with the nodes and controllers a platform team provides
(the shipped dev and a4 stacks' pools), a Docker engine and a registry on
127.0.0.1 (e2e/harness/docker_engine.py), the Dockerfiles' base images as
local stand-ins (base_images.py). The stack is the dev stack's run and
dataset and the a4 stack's, as a stack for that existing cluster that builds
its images (`imageBuild`: the registry on 127.0.0.1, the host's network, the
engine's own BuildKit), deployed through the real Pulumi CLI with the
docker-build provider built from its module (e2e/tools/docker-build).

In order: `up` builds and pushes both images and the runs carry the pushed
digests, equal to the registry's and to the stack's export, and each image
holds exactly the files core/dockerfile.py hashes; a second `up` changes
nothing; a trainer's code change gives that image a new digest, pushes only
its code layer and replaces exactly that trainer's runs; a README change
replaces nothing; a Dockerfile that fails to build fails `up` (with `exec`,
the provider says only buildx's exit status; buildx says BuildKit's words on
the same build) and leaves every run on a pushed digest. The trainers'
runs inside their images are in test_runs.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.dockerfile import TRAINER_IMAGES, content_files, content_tag
from e2e.harness.delivery import UP_TIMEOUT, Delivery
from e2e.harness.observe import wait_bound

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
IMAGE = "docker-build:index:Image"
TIMEOUT = 180.0


def _changes(steps: list[dict]) -> list[tuple[str, str, str]]:
    return sorted((s["op"], s["type"], s["name"]) for s in steps if s["op"] != "same")


def _touch(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_up_builds_and_pushes_both_images_and_the_runs_carry_the_pushed_digests(delivery):
    step = delivery.engine.run("up", "--yes", "--skip-preview", timeout=UP_TIMEOUT)
    exports = delivery.exports()
    assert set(exports) == set(TRAINER_IMAGES), exports
    for trainer, ref in exports.items():
        pushed = delivery.registry_digest(trainer)
        assert ref == f"{delivery.docker.registry.host}/{delivery.repository(trainer)}@{pushed}"
        delivery.pushed[trainer] = [pushed]
        delivery.report.append(f"== {trainer}: registry digest {pushed} (tag {content_tag(TRAINER_IMAGES[trainer])}), "
                      f"{sum(l['size'] for l in delivery.layers(trainer, pushed)) / 1e6:.0f} MB compressed")
    for run, (image, _) in delivery.jobset_images().items():
        assert image == exports[delivery.runs[run]], (run, image)
    for jobset in delivery.kube.list("jobset.x-k8s.io/v1alpha2", "JobSet", delivery.namespace):
        assert wait_bound(delivery.kube, jobset, TIMEOUT), jobset["metadata"]["name"]
    delivery.report.append(f"== first up: {step.seconds:.0f}s")


@pytest.mark.parametrize("trainer", sorted(TRAINER_IMAGES))
def test_each_image_holds_exactly_the_files_its_content_tag_covers(delivery, trainer):
    """What BuildKit sent (the ignore file) is what core/dockerfile.py hashes: the image's /app is the
    COPY sources' files the tag covers, nothing more, nothing less."""
    ref = delivery.exports()[trainer]
    listed = delivery.docker.docker("run", "--rm", "--network", "none", "--entrypoint", "find", ref,
                                    "/app", "-type", "f", "-not", "-name", "*.pyc").stdout.split()
    expected = {f"/app/{f}" for f in content_files(TRAINER_IMAGES[trainer]) if f.startswith("trainers/")}
    assert set(listed) == expected, (sorted(set(listed) - expected), sorted(expected - set(listed)))


def test_a_second_up_builds_pushes_and_changes_nothing(delivery):
    tags = {t: delivery.docker.registry.tags(delivery.repository(t)) for t in TRAINER_IMAGES}
    before = delivery.jobset_images()
    assert _changes(delivery.engine.preview_steps()) == []
    step = delivery.engine.run("up", "--yes", "--skip-preview", timeout=UP_TIMEOUT)
    assert re.search(r"\d+ unchanged", step.stdout), step.stdout[-2000:]
    assert not re.search(r"\d+ (created|updated|deleted|replaced)", step.stdout), step.stdout[-2000:]
    assert delivery.jobset_images() == before  # the same objects, uid and all
    assert {t: delivery.docker.registry.tags(delivery.repository(t)) for t in TRAINER_IMAGES} == tags
    delivery.report.append(f"== second up: nothing to do, {step.seconds:.1f}s")


def _replace_one(delivery: Delivery, trainer: str, changed: Path) -> None:
    """A change to `trainer`'s code: its image and exactly its runs and staging Jobs are replaced."""
    before = delivery.jobset_images()
    old = delivery.registry_digest(trainer)
    _touch(changed, f"\n# {trainer} changed by the e2e\n")
    changes = _changes(delivery.engine.preview_steps())
    mine = {r for r, t in delivery.runs.items() if t == trainer}
    replaced_runs = {n.removeprefix("runs-") for _, t, n in changes if t == JOBSET}
    assert replaced_runs == mine, changes
    assert {n for _, t, n in changes if t == IMAGE} == {f"images-{trainer}"}, changes
    # Nothing else: only what runs this trainer's image (its runs, the staging Jobs in its image).
    assert {n for _, t, n in changes if t != IMAGE} <= {n for n, t in delivery.owners.items() if t == trainer}, changes
    step = delivery.engine.run("up", "--yes", "--skip-preview", timeout=UP_TIMEOUT)
    new = delivery.registry_digest(trainer)
    assert new != old
    after = delivery.jobset_images()
    for run, t in delivery.runs.items():
        if t == trainer:
            assert after[run][0].endswith(f"@{new}") and after[run][1] != before[run][1], run
        else:
            assert after[run] == before[run], run  # untouched: same image, same object
    old_layers, new_layers = delivery.layers(trainer, old), delivery.layers(trainer, new)
    kept = {l["digest"] for l in old_layers}
    fresh = [l for l in new_layers if l["digest"] not in kept]
    total = sum(l["size"] for l in new_layers)
    # Dependencies before code: every layer before the first new one is the old image's, and what is
    # new is the code alone (the COPYs of the trainer's sources, under a megabyte).
    first_new = next(i for i, l in enumerate(new_layers) if l["digest"] not in kept)
    assert new_layers[:first_new] == old_layers[:first_new] and first_new >= len(new_layers) - 3, (old_layers,
                                                                                                new_layers)
    assert fresh and sum(l["size"] for l in fresh) < 1_000_000, fresh
    sent = sum(l["size"] for l in fresh)
    delivery.pushed[trainer].append(new)
    delivery.report.append(f"== {trainer} code changed ({changed.relative_to(delivery.program)}): up {step.seconds:.1f}s, "
                  f"new digest {new}; replaced {sorted(replaced_runs)} and nothing else; {len(fresh)} new "
                  f"layer(s), {sent / 1e3:.1f} kB of {total / 1e6:.0f} MB ({sent / total:.2e} of the image)")


def test_a_trainer_code_change_replaces_exactly_that_trainer_s_runs(delivery):
    _replace_one(delivery, "gemma-jax", delivery.program / "trainers" / "gemma_jax" / "train.py")


def test_the_other_trainer_s_code_change_replaces_nothing_of_this_one_s(delivery):
    _replace_one(delivery, "trl-gpu", delivery.program / "trainers" / "trl_gpu" / "sft.py")


def test_a_documentation_change_replaces_nothing(delivery):
    for readme in ("trainers/gemma_jax/README.md", "trainers/trl_gpu/README.md"):
        _touch(delivery.program / readme, "\nA line of documentation added by the e2e.\n")
    assert _changes(delivery.engine.preview_steps()) == []
    delivery.report.append("== READMEs of both trainers changed: preview changes nothing")


def test_a_dockerfile_that_fails_fails_up_and_no_run_gets_a_stale_digest(delivery):
    dockerfile = delivery.program / "docker" / "gemma-jax" / "Dockerfile"
    original = dockerfile.read_text()
    before = delivery.jobset_images()
    dockerfile.write_text(original.replace("WORKDIR /app", "RUN echo e2e-broken-build >&2 && exit 3\nWORKDIR /app"))
    try:
        step = delivery.engine.run("up", "--yes", "--skip-preview", check=False, timeout=UP_TIMEOUT)
        assert step.returncode != 0, step.output[-3000:]
        failed = re.search(r"docker-build:index:Image \(images-gemma-jax\):\s*\n\s*error: (.+)", step.output)
        assert failed, step.output[-4000:]
        # With `exec`, provider v0.0.22 reports only buildx's exit status: it buffers buildx's stderr and
        # logs it only on its embedded path's errors (provider/internal/cli.go, exec and tail). What the
        # builder said is BuildKit's own message for the RUN step, as buildx prints it for the same build.
        again = delivery.docker.docker("buildx", "build", "--builder", "default", "--network", "host",
                                       "--progress", "plain", "-f", str(dockerfile), str(delivery.program),
                                       check=False)
        # The wording of the engine's BuildKit (Docker 20.10's; newer ones say `process "…" did not complete
        # successfully`).
        said = re.search(r"executor failed running \[/bin/sh -c echo e2e-broken-build >&2 && exit 3\]: exit code: 3",
                         again.stdout + again.stderr)
        assert again.returncode != 0 and said, (again.stdout + again.stderr)[-3000:]
        after = delivery.jobset_images()
        assert after == before  # no run replaced, none declared with a digest that wasn't pushed
        state = json.loads(delivery.engine.run("stack", "export").stdout)
        declared = [r for r in state["deployment"]["resources"] if r["type"] == JOBSET]
        pushed = {d for digests in delivery.pushed.values() for d in digests}
        for resource in declared:
            image = json.dumps(resource.get("inputs", {}))
            digests = set(re.findall(r"@(sha256:[0-9a-f]{64})", image))
            assert digests and digests <= pushed, (resource["urn"], digests)
        delivery.report.append(f"== a broken gemma-jax Dockerfile: up exited {step.returncode}, the image's error "
                               f"`{failed.group(1).strip()}` (the provider's, with exec); buildx on the same build: "
                               f"{said.group(0)}; every run still on a pushed digest")
    finally:
        dockerfile.write_text(original)
