"""Where `pulumi up` pushes the trainer images it builds, and how it builds them (`imageBuild:`).

Unset, a stack pushes to its own Artifact Registry repository and builds with
the Docker engine's defaults: a real stack is unchanged by this key.

- `registry`: another repository to push to, `<host>[:<port>]/<path>` (a
  registry the cluster's nodes can pull from). It is also what lets a stack
  for an existing cluster build its trainer images, since such a stack
  declares no registry of its own.
- `network`: the network the Dockerfiles' RUN steps use: `default` (the
  builder's own) or `host` (the machine's network, for an engine that has no
  bridge network for its build containers).
- `builder`: a buildx builder by name; empty, the docker-build provider picks
  one (it never builds with the engine's own `docker` driver then, and
  creates a `docker-container` builder when it finds no other). `default`
  names the Docker context's own builder: the engine's embedded BuildKit,
  whose local images a Dockerfile's FROM uses without pulling.
- `exec`: the provider runs the buildx CLI plugin (`docker-buildx`, where the
  Docker client finds its plugins) instead of its embedded buildx client. On
  an engine its embedded client doesn't build on with the `docker` driver
  (Docker 20.10, where it picked a `docker-container` builder even when told
  `default`), the plugin does.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, StrictBool, field_validator

from stack.models import StackModel
from stack.problems import Problem, raise_problems

# <host>[:<port>]/<path>: a registry host (a DNS name or an IPv4 address) and a repository path in
# the reference grammar's lower-case components (distribution/reference, reference.go).
REGISTRY_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)+$")
BUILDER_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


class ImageBuild(StackModel):
    """`imageBuild`: the registry built images go to and the build's network and builder."""

    registry: str = Field(default="", description="<host>[:<port>]/<path>; default: the stack's Artifact Registry")
    network: Literal["default", "host"] = Field(default="default", description="the RUN steps' network")
    builder: str = Field(default="", description="a buildx builder's name; default: the provider's choice")
    exec: StrictBool = Field(default=False, description="build with the buildx CLI plugin, not the embedded client")

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str) -> str:
        if value and not REGISTRY_RE.fullmatch(value):
            raise_problems([Problem("", value, "is not a registry repository address",
                                    "<host>[:<port>]/<path> in lower case, e.g. 127.0.0.1:5000/finetune or "
                                    "europe-docker.pkg.dev/<project>/<repository>")])
        return value

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: object) -> object:
        if value not in ("default", "host"):
            raise_problems([Problem("", value, "is not a build network", "default | host")])
        return value

    @field_validator("builder")
    @classmethod
    def _builder(cls, value: str) -> str:
        if value and not BUILDER_RE.fullmatch(value):
            raise_problems([Problem("", value, "is not a buildx builder name",
                                    "letters, digits, '.', '_' and '-', e.g. default")])
        return value
