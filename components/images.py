"""Trainer images built from this repository and pushed to the stack's Artifact Registry.

Each image is tagged with the content tag of what it is built from
(core/dockerfile.py), and exposed by digest (`<registry>/<image>@sha256:...`),
which is what runs reference. Unchanged trainer code means an unchanged tag,
so `pulumi up` builds nothing; changed code means a new tag, a new build, a new
digest, and `pulumi preview` shows the runs using it replaced.

Two builders:
- `docker` (default): pulumi-docker-build, with the local Docker engine
  (BuildKit/buildx). Pushing uses Docker's credentials for the registry host:
  `gcloud auth configure-docker <region>-docker.pkg.dev` once.
- `cloudbuild`: no local Docker engine; `gcloud builds submit` runs the same
  Dockerfile in Cloud Build (docker/cloudbuild.yaml) and the digest is read
  back with `gcloud artifacts docker images describe`. Needs gcloud
  credentials and the Cloud Build API enabled.

The stack's `imageBuild` (stack/image_build.py) may name another registry,
the build's network and a buildx builder; unset, none of them is passed, so
the images' inputs are what they were without the key.

A `pulumi preview` needs no Docker engine; `up` does. The images are declared
with `buildOnPreview: false`, so a preview never builds (pulumi-docker-build
v0.0.22, provider/internal/image.go: Create returns before building when
`req.DryRun && !input.shouldBuildOnPreview()`), and the provider plans the
image without reaching an engine: e2e/tests/test_docker_build_provider.py
asks it over its gRPC interface with DOCKER_HOST naming a socket that doesn't
exist (the preview's Create succeeds, the build's fails on that socket).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pulumi
import pulumi_command as command
import pulumi_docker_build as docker_build

from core.dockerfile import IMAGE_BUILDERS, REPO_ROOT, TRAINER_IMAGES, ImageBuilder, TrainerImage, content_tag
from stack.config import StackConfig
from stack.images import trainers_to_build

Builder = ImageBuilder
BUILDERS = IMAGE_BUILDERS
CLOUDBUILD_CONFIG = "docker/cloudbuild.yaml"
# TPU v6e hosts and A4 machines are x86-64.
PLATFORM = docker_build.Platform.LINUX_AMD64


@dataclass(frozen=True)
class TrainerImagesArgs:
    registry_url: pulumi.Input[str]  # <region>-docker.pkg.dev/<project>/<repository>
    builder: Builder = "docker"
    trainers: Sequence[str] = tuple(TRAINER_IMAGES)
    project: str | None = None  # cloudbuild only: the project that runs the build
    region: str | None = None  # cloudbuild only: the Cloud Build region
    context_root: Path = field(default=REPO_ROOT)
    network: str = "default"  # docker only: the RUN steps' network (default | host)
    builder_name: str = ""  # docker only: a buildx builder; empty: the provider's choice
    exec_buildx: bool = False  # docker only: the buildx CLI plugin instead of the provider's embedded client


def relative(path: Path) -> str:
    """`path` relative to the working directory (the project directory under the CLI).

    Absolute paths would differ between machines and checkouts and show up as
    a change of every image in the next preview.
    """
    return os.path.relpath(path)


def digest_ref(registry_url: str, image_name: str, digest: str) -> str:
    """`<registry>/<image>@sha256:...`, or '' while the digest is not known."""
    digest = digest.strip()
    return f"{registry_url}/{image_name}@{digest}" if digest else ""


def cloudbuild_command(
    image: TrainerImage, tagged: str, project: str, region: str
) -> str:
    """Shell command that builds and pushes `tagged` in Cloud Build and prints its digest."""
    q = shlex.quote
    substitutions = f"_IMAGE={tagged},_DOCKERFILE={image.dockerfile}"
    return (
        f"gcloud builds submit . --quiet --project={q(project)} --region={q(region)}"
        f" --config={CLOUDBUILD_CONFIG} --substitutions={q(substitutions)} 1>&2"
        f" && gcloud artifacts docker images describe {q(tagged)} --project={q(project)}"
        " --format='value(image_summary.digest)'"
    )


class TrainerImages(pulumi.ComponentResource):
    """Builds and pushes one image per trainer; `refs[trainer]` is its digest reference."""

    refs: dict[str, pulumi.Output[str]]
    tags: dict[str, str]
    builds: dict[str, pulumi.CustomResource]  # the build resource of each trainer

    def __init__(
        self,
        name: str,
        args: TrainerImagesArgs,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gke-finetune:platform:TrainerImages", name, None, opts)
        if args.builder not in BUILDERS:
            raise ValueError(f"image builder {args.builder!r}; allowed: {list(BUILDERS)}")
        if args.builder == "cloudbuild" and not (args.project and args.region):
            raise ValueError("the cloudbuild image builder needs project and region")

        child = pulumi.ResourceOptions(parent=self)
        registry = pulumi.Output.from_input(args.registry_url)
        self.refs = {}
        self.tags = {}
        self.builds = {}
        for trainer in args.trainers:
            image = TRAINER_IMAGES[trainer]
            tag = content_tag(image, args.context_root)
            self.tags[trainer] = tag
            tagged = registry.apply(lambda url, i=image, t=tag: f"{url}/{i.image_name}:{t}")
            if args.builder == "docker":
                build = self._docker(name, image, tagged, args, child)
                digest = build.digest
            else:
                build = self._cloudbuild(name, image, tag, tagged, args, child)
                digest = build.stdout
            self.builds[trainer] = build
            self.refs[trainer] = pulumi.Output.all(registry, digest).apply(
                lambda a, i=image: digest_ref(a[0], i.image_name, a[1])
            )

        self.register_outputs({"refs": self.refs, "tags": self.tags})

    @staticmethod
    def _docker(
        name: str,
        image: TrainerImage,
        tagged: pulumi.Output[str],
        args: TrainerImagesArgs,
        opts: pulumi.ResourceOptions,
    ) -> docker_build.Image:
        root = args.context_root
        # The SDK's own default network is "default", so without imageBuild the inputs are unchanged;
        # a builder is named only when the stack names one.
        optional = {}
        if args.builder_name:
            optional["builder"] = docker_build.BuilderConfigArgs(name=args.builder_name)
        if args.exec_buildx:
            optional["exec_"] = True
        return docker_build.Image(
            f"{name}-{image.trainer}",
            context=docker_build.BuildContextArgs(location=relative(root)),
            dockerfile=docker_build.DockerfileArgs(location=relative(root / image.dockerfile)),
            platforms=[PLATFORM],
            tags=[tagged],
            push=True,
            # A preview only says whether the tag (the content) changed; the
            # build happens on `up`, so reviews need no Docker engine (above).
            build_on_preview=False,
            network=docker_build.NetworkMode(args.network),
            opts=opts,
            **optional,
        )

    @staticmethod
    def _cloudbuild(
        name: str,
        image: TrainerImage,
        tag: str,
        tagged: pulumi.Output[str],
        args: TrainerImagesArgs,
        opts: pulumi.ResourceOptions,
    ) -> command.local.Command:
        return command.local.Command(
            f"{name}-{image.trainer}",
            create=tagged.apply(
                lambda t: cloudbuild_command(image, t, args.project, args.region)
            ),
            dir=relative(args.context_root),
            triggers=[tag],
            opts=opts,
        )


def trainer_images(cfg: StackConfig, registry_url: pulumi.Input[str] | None,
                   opts: pulumi.ResourceOptions | None = None) -> dict:
    """Each trainer's image as the runs get it: pinned in the stack file, or built here and pushed to
    `imageBuild.registry`, else to `registry_url` (the stack's own registry). Exports the built ones."""
    images = dict(cfg.images.by_trainer())
    to_build = trainers_to_build(cfg)
    if not to_build:
        return images
    settings = cfg.image_build
    built = TrainerImages(
        "images",
        TrainerImagesArgs(
            registry_url=settings.registry or registry_url,
            builder=cfg.image_builder,
            trainers=to_build,
            project=cfg.project,
            region=cfg.region,
            network=settings.network,
            builder_name=settings.builder,
            exec_buildx=settings.exec,
        ),
        opts,
    )
    images.update(built.refs)
    pulumi.export("images", built.refs)
    return images
