"""Which Google Cloud APIs a stack enables: the platform's, Cloud Build when it builds with it, Secret Manager
when a pod reads the Hugging Face token."""

from __future__ import annotations

from core.apis import CLOUD_BUILD_API, PLATFORM_APIS, SECRET_MANAGER_API
from stack.config import StackConfig
from stack.images import trainers_to_build


def required_apis(config: StackConfig) -> tuple[str, ...]:
    builds_in_cloud = config.image_builder == "cloudbuild" and bool(trainers_to_build(config))
    return (PLATFORM_APIS + ((CLOUD_BUILD_API,) if builds_in_cloud else ())
            + ((SECRET_MANAGER_API,) if config.reads_hub else ()))
