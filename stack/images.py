"""Which trainer images a stack builds and which it pins: the one build-or-pin decision.

A trainer a run needs is built from this repository by `pulumi up`
(components/images.py) unless the stack pins it by digest under `images:`,
or every run of it names its own `image`; it goes to the stack's registry, or
to `imageBuild.registry` (stack/image_build.py). Offline (the plan, the goldens),
a built image has no digest yet: it stands at the stack's real registry
address with `UNBUILT_DIGEST`, so a rendered manifest is otherwise exactly
the applied one and does not change with every edit of a trainer's code.
"""

from __future__ import annotations

from core.dockerfile import TRAINER_IMAGES
from core.ids import registry_url
from stack.config import StackConfig

# Stands in for the digest of an image that is built on `pulumi up`.
UNBUILT_DIGEST = "sha256:" + "0" * 64


def trainers_to_build(config: StackConfig) -> list[str]:
    """Trainers whose image `pulumi up` builds: needed by a run without its own image, and not pinned."""
    pinned = config.images.by_trainer()
    return [t for t in config.needed_trainers() if t not in pinned]  # the runs' and staging Jobs' images


def offline_images(config: StackConfig) -> dict[str, str]:
    """Each trainer's image as the runs get it, with `UNBUILT_DIGEST` for the ones `pulumi up` builds."""
    registry = config.image_build.registry or registry_url(config.region, config.project, config.registry_id)
    built = {t: f"{registry}/{TRAINER_IMAGES[t].image_name}@{UNBUILT_DIGEST}" for t in trainers_to_build(config)}
    return {**built, **config.images.by_trainer()}
