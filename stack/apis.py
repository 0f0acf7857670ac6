"""Which Google Cloud APIs a stack enables: the platform's, and Cloud Build when it builds with it."""

from __future__ import annotations

from core.apis import CLOUD_BUILD_API, PLATFORM_APIS
from stack.config import StackConfig
from stack.images import trainers_to_build


def required_apis(config: StackConfig) -> tuple[str, ...]:
    builds_in_cloud = config.image_builder == "cloudbuild" and bool(trainers_to_build(config))
    return PLATFORM_APIS + ((CLOUD_BUILD_API,) if builds_in_cloud else ())
