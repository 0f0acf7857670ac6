"""The stack's configuration: everything one stack file says, validated and frozen.

`StackConfig.from_mapping` validates the stack file's keys (camelCase, as in
Pulumi.<stack>.yaml, plus `project`, `region` and `stack`) and raises one
`ConfigError` listing every problem. The one reader of stack files
(stack/reader.py) builds the mapping, from Pulumi config in the program and
from the files offline. Defaults live here and in stack/models.py;
Pulumi.yaml declares the same keys and defaults (a test keeps them in step).
"""

from __future__ import annotations

import dataclasses

from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from core.contract import SchedulingContract
from core.dockerfile import IMAGE_BUILDERS, ImageBuilder
from core.ids import default_bucket_name, default_cluster_name, default_registry_id
from core.names import (HF_TOKEN_SECRET, RUNS_NAMESPACE, BucketLayout, export_prefix, server_service_account,
                        stager_service_account, trainer_service_account)
from core.syntax import DNS_1035_LABEL, or_empty, PROJECT_ID, REGION, STACK_SEGMENT
from core.trainers import TRAINERS
from stack.contracts import derive_contracts
from stack.models import Images, PoolConfig, ShapeConfig, StackModel, TopLevelCount, TopLevelFlag
from stack.datasets import DatasetConfig
from stack.existing import Charts, ExistingCluster, existing_stack_problems, platform_pool_problems
from stack.image_build import ImageBuild
from stack.network import NetworkConfig
from stack.queueing import compute_class_renames, compute_classes, kueue_flavors, queueing_problems, with_queues
from stack.problems import MISSING, ConfigError, Problem, from_validation_error, raise_problems
from stack.rules import (bucket_problems, dataset_stack_problems, mode_problems, namespace_problems,
                         offering_problems, unique_name_problems, zone_problems)
from stack.run_mix import run_datas
from stack.runs import RunConfig, run_problems
from stack.sharing import KueueSettings, sharing_problems
from stack.serving import ServeConfig, serve_problems
from stack.secrets import needs_hf_token, secret_name, secret_problems, secret_version


class StackConfig(StackModel):
    """Everything one stack file says. Built only through validation; immutable."""

    project: str = Field(description="gcp:project")
    region: str = Field(description="gcp:region")
    # The project's number, which IAM principals of Workload Identity name. Given, nothing
    # reads it from the Resource Manager API, so a preview needs no live API.
    project_number: str = Field(default="", description="default: read from the API on preview and up")
    stack: str = Field(default="dev", min_length=1, description="the Pulumi stack name")
    mode: Literal["standard", "autopilot"] = "standard"
    # Empty: `finetune-<stack>` (core/ids.py), so two stacks of one project never ask for one name.
    cluster_name: str = Field(default="", pattern=or_empty(DNS_1035_LABEL), max_length=40,
                              description="default: finetune-<stack>")
    # Google's ReleaseChannel.channel values but the deprecated UNSPECIFIED (admission/google_api checks it).
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "REGULAR"
    deletion_protection: TopLevelFlag = True
    system_machine_type: str = "e2-standard-4"
    system_node_count: TopLevelCount = Field(default=1, ge=1, description="per zone of the region")
    zones: tuple[str, ...] = Field(default=(), description="default node locations of pools")
    bucket_name: str = Field(default="", description="default: <project>-<stack>-finetune")
    registry_name: str = Field(default="", pattern=or_empty(DNS_1035_LABEL), max_length=63,
                               description="default: finetune-<stack>")
    # The Kubernetes namespace of the stack's runs, service accounts and SecretProviderClass; the cluster-scoped
    # objects are named after it (core/names.py `cluster_scoped`). Empty: `finetune` on the stack's own
    # cluster; an existing cluster's stack names one (stack/existing.py).
    namespace: str = Field(default="", description="default: finetune (own cluster)")
    # Create `namespace` (an existing cluster's stack deploys into one that exists unless this is true;
    # the stack's own cluster's namespace is always the stack's).
    create_namespace: TopLevelFlag = False
    network: NetworkConfig = NetworkConfig()
    # A cluster that exists already (stack/existing.py); None: the stack declares its own.
    existing_cluster: ExistingCluster | None = None
    charts: Charts = Charts()
    # The settings of the Kueue the stack installs (stack/sharing.py).
    kueue: KueueSettings = KueueSettings()
    pools: tuple[PoolConfig, ...] = ()
    shapes: tuple[ShapeConfig, ...] = ()
    images: Images = Images()
    image_builder: ImageBuilder = Field(
        default="docker", description="how unpinned trainer images are built: docker | cloudbuild"
    )
    datasets: tuple[DatasetConfig, ...] = ()
    runs: tuple[RunConfig, ...] = ()
    # An OpenAI-compatible vLLM server of one run's export (stack/serving.py); None: no server.
    serve: ServeConfig | None = None
    # The Secret Manager secret holding the Hugging Face token (stack/secrets.py), mounted into the pods
    # that read the Hub by GKE's Secret Manager add-on; never a Pulumi value.
    hf_token_secret: str = Field(default=HF_TOKEN_SECRET, description="a Secret Manager secret")

    # Where built trainer images are pushed and how they are built (stack/image_build.py).
    image_build: ImageBuild = ImageBuild()
    # Runs deployed before the bucket's prefixes carried the stack, which keep their old prefixes: found in
    # the bucket at preview (components/bucket_preflight.py), never set by a stack file.
    _legacy_runs: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @field_validator("stack")
    @classmethod
    def _stack_name(cls, value: str) -> str:
        # The stack names its bucket prefixes (core/names.py) and a gcsfuse mount's `only-dir`, which gcsfuse
        # cleans as a path (cfg/rationalize.go resolveOnlyDir): '.' or '..' would name another prefix.
        if not STACK_SEGMENT.fullmatch(value):
            raise_problems([Problem("", value, "is not a stack name the bucket's prefixes can carry",
                                    "letters, digits, '_', '-' and '.', not starting with '.'")])
        return value

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        if not PROJECT_ID.fullmatch(value):
            raise_problems([Problem("", value, "is not a project id",
                                    "6-30 lowercase letters, digits or hyphens, starting with a letter, "
                                    "not ending with a hyphen")])
        return value

    @field_validator("hf_token_secret")
    @classmethod
    def _hf_token_secret(cls, value: str) -> str:
        raise_problems(secret_problems(value))
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        raise_problems(namespace_problems("", value) if value else [])
        return value

    @field_validator("project_number")
    @classmethod
    def _project_number(cls, value: str) -> str:
        if value and not (value.isdigit() and 1 <= len(value) <= 20 and value[0] != "0"):
            raise_problems([Problem("", value, "is not a project number",
                                    "the project's number as digits (gcloud projects describe <id> "
                                    "--format='value(projectNumber)'), or empty")])
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not REGION.fullmatch(value):
            raise_problems([Problem("", value, "is not a region", "e.g. 'us-east5'")])
        return value

    @field_validator("zones")
    @classmethod
    def _zones(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        raise_problems(zone_problems("", value, info.data.get("region")))
        return value

    @field_validator("image_builder", mode="before")
    @classmethod
    def _image_builder(cls, value: Any) -> Any:
        if value not in IMAGE_BUILDERS:
            raise_problems([Problem("", value, "is not an image builder", " | ".join(IMAGE_BUILDERS))])
        return value

    @field_validator("bucket_name")
    @classmethod
    def _bucket(cls, value: str) -> str:
        raise_problems(bucket_problems("", value) if value else [])
        return value

    @field_validator("existing_cluster", mode="before")
    @classmethod
    def _no_existing_cluster(cls, value: Any) -> Any:
        # Pulumi.yaml's default, {}: the stack declares its own cluster.
        return None if value == {} else value

    @field_validator("serve", mode="before")
    @classmethod
    def _no_server(cls, value: Any) -> Any:
        # Pulumi.yaml's default, {}: no server.
        return None if value == {} else value

    @field_validator("pools")
    @classmethod
    def _pools(cls, pools: tuple[PoolConfig, ...], info: ValidationInfo) -> tuple[PoolConfig, ...]:
        region, zones = info.data.get("region"), info.data.get("zones", ())
        problems = []
        if "existing_cluster" not in info.data or info.data["existing_cluster"] is not None:
            # Described by their node pools (stack/existing.py), not placed in zones (or the
            # existingCluster key is wrong, which is reported).
            return pools
        for i, pool in enumerate(pools):
            if not (pool.zones or zones):
                # An invalid region is reported on its own key; its zones are unknown then.
                problems.append(Problem(f"[{i}].zones", [], "is empty and the stack sets no `zones`",
                                        f"zones of {region}" if region else "zones of gcp:region"))
            problems += zone_problems(f"[{i}].zones", pool.zones, region)
            if pool.shape().multi_host and len(pool.zones or zones) > 1:
                # A multi-host TPU slice lives in one zone.
                problems.append(Problem(f"[{i}].zones", list(pool.zones or zones),
                                        f"for multi-host {pool.shape().description}", "exactly one zone"))
        raise_problems(problems)
        return pools

    @model_validator(mode="after")
    def _stack_rules(self) -> StackConfig:
        problems = [] if self.bucket_name else bucket_problems("bucketName (derived)", self.data_bucket)
        problems += mode_problems(self.autopilot, self.pools, self.shapes)
        problems += unique_name_problems("shapes" if self.autopilot else "pools", self.accelerator_groups())
        problems += run_problems(self.runs, self.contracts())
        problems += dataset_stack_problems(self.datasets, self.runs)
        problems += queueing_problems(self.runs, self.contracts(), self.autopilot)
        problems += sharing_problems(self)
        problems += serve_problems(self.serve, self.runs, self.contracts(), {c.pool for c in self.kueue_flavors()},
                                   self.autopilot)
        problems += self._existing_problems()
        problems += self._offering_problems()
        raise_problems(problems)
        return self

    def _offering_problems(self) -> list[Problem]:
        """Pools in zones (or a region) that don't offer their accelerator; an existing cluster's are as they are."""
        if self.existing is not None:
            return []
        key = "shapes" if self.autopilot else "pools"
        return offering_problems([(f"{key}[{i}].zones", g.name, g.shape().accelerator.name,
                                   () if self.autopilot else self.pool_zones(g))
                                  for i, g in enumerate(self.accelerator_groups())], self.region)

    def _existing_problems(self) -> list[Problem]:
        if self.existing is None:
            return platform_pool_problems(self.pools)
        problems = existing_stack_problems(self)
        if self.project_number == "" and self.existing.bucket_grants:
            problems.append(Problem("projectNumber", MISSING, "and existingCluster.bucketGrants is true: the grants name "
                                    "the workload identities' principals by the project's number",
                                    "the project's number (gcloud projects describe <id> "
                                    "--format='value(projectNumber)')"))
        flavors = {c.pool for c in self.kueue_flavors()}
        problems += [
            Problem(f"pools[{i}].nodePools", list(p.node_pools), "of a multislice pool Kueue admits runs to: its "
                    "ResourceFlavor can't name several node pools", "a single-slice pool, or runs without "
                    "ladder, priority or queued capacity on it")
            for i, p in enumerate(self.pools) if p.name in flavors and len(p.described_node_pools()) > 1
        ]
        return problems

    @property
    def existing(self) -> ExistingCluster | None:
        """The existing cluster the stack deploys into; None: the stack declares its cluster."""
        return self.existing_cluster

    def needed_trainers(self) -> list[str]:
        """Trainers whose image the stack needs: a run's without its own `image`, and the staging Jobs'."""
        needed = {run.trainer for run in self.runs if run.trainer and not run.image}
        needed |= {self.staging_trainer(d) for d in self.datasets if d.staged_in_cluster}
        return sorted(needed)

    @property
    def gke_cluster_name(self) -> str:
        """The stack's own cluster's name: `clusterName`, or `finetune-<stack>`."""
        return self.cluster_name or default_cluster_name(self.stack)

    @property
    def registry_id(self) -> str:
        """The stack's Artifact Registry repository: `registryName`, or `finetune-<stack>`."""
        return self.registry_name or default_registry_id(self.stack)

    @property
    def runs_namespace(self) -> str:
        """Where the stack's runs live: `namespace`, or `finetune` on the stack's own cluster."""
        return self.namespace or RUNS_NAMESPACE

    @property
    def creates_namespace(self) -> bool:
        """Whether the stack declares its namespace: always on its own cluster, on request on an existing one."""
        return self.existing is None or self.create_namespace

    @property
    def reads_hub(self) -> bool:
        """Whether a run or a staging Job of the stack mounts the Hugging Face token."""
        return needs_hf_token(self.runs, self.datasets)

    @property
    def hf_token_version(self) -> str:
        """The token's version the pods mount: `projects/<p>/secrets/<s>/versions/<v>`."""
        return secret_version(self.hf_token_secret, self.project)

    @property
    def hf_token_secret_name(self) -> str:
        """The token's secret, `projects/<p>/secrets/<s>`: its readers' grants are on it."""
        return secret_name(self.hf_token_secret, self.project)

    @property
    def trainer_account(self) -> str:
        return trainer_service_account(self.stack)

    @property
    def server_account(self) -> str:
        return server_service_account(self.stack)

    @property
    def stager_account(self) -> str:
        return stager_service_account(self.stack)

    @property
    def data_bucket(self) -> str:
        return self.bucket_name or default_bucket_name(self.project, self.stack)

    @property
    def bucket_layout(self) -> BucketLayout:
        """Where the stack's datasets, checkpoints and profiles are in its bucket (core/names.py)."""
        return BucketLayout(self.stack, self._legacy_runs)

    def with_legacy_runs(self, runs) -> StackConfig:
        """The same stack, with `runs` kept on the prefixes they were deployed with before prefixes carried the
        stack (components/bucket_preflight.py finds them)."""
        copy = self.model_copy()
        copy._legacy_runs = frozenset(runs) & {run.name for run in self.runs}
        return copy

    @property
    def autopilot(self) -> bool:
        return self.mode == "autopilot"

    def accelerator_groups(self) -> tuple[ShapeConfig, ...]:
        """The named shapes runs may refer to: pools (Standard) or shapes (Autopilot)."""
        return self.shapes if self.autopilot else self.pools

    def dataset(self, name: str) -> DatasetConfig | None:
        return next((d for d in self.datasets if d.name == name), None)

    def staging_trainer(self, dataset: DatasetConfig) -> str:
        """The trainer whose image stages `dataset`: the one that tokenizes it, else the first run's
        that reads it (its image is built anyway), else the first trainer of the table."""
        if dataset.tokenize:
            return next(name for name, row in TRAINERS.items() if row.token_shards_module)
        readers = [run.trainer for run in self.runs
                   if run.trainer and dataset.name in [d.partition("/")[0] for d in run_datas(run)]]
        return readers[0] if readers else next(iter(TRAINERS))

    def _path_of(self, run, data: str) -> str | None:
        head, _, rest = data.partition("/")
        dataset = self.dataset(head)
        if dataset is None:
            return None
        reads_tokens = run.trainer is not None and run.row.token_shards_module is not None
        return data if rest else dataset.path_for(reads_tokens and not run.mix)

    def data_paths(self) -> dict[str, str]:
        """Each run's data, below datasets/<stack>/: the named dataset's file, directory or token shards."""
        paths = {run.name: self._path_of(run, run.data) for run in self.runs if run.data}
        return {name: path for name, path in paths.items() if path is not None}

    def mix_paths(self) -> dict[str, tuple[str, ...]]:
        """Each mixing run's sources, below datasets/<stack>/ (records: a mix is never token shards)."""
        return {run.name: tuple(self._path_of(run, s.data) or s.data for s in run.mix) for run in self.runs if run.mix}

    def export_prefixes(self) -> dict[str, str]:
        """Each run with `export:`, and where its model goes in the bucket (`exports/<stack>/<run>`)."""
        return {run.name: export_prefix(self.stack, run.name) for run in self.runs if run.export is not None}

    def contracts(self) -> dict[str, SchedulingContract]:
        """The scheduling contract of every pool (Standard) or shape (Autopilot), by name."""
        contracts = derive_contracts(self.accelerator_groups(), self.autopilot, self.existing is not None)
        shares = {p.name: p.quota for p in self.pools if p.quota is not None}
        contracts = {n: dataclasses.replace(c, share_chips=shares[n].chips, lend_chips=shares[n].lending_limit_chips,
                                            borrow_chips=shares[n].borrowing_limit_chips) if n in shares else c
                     for n, c in contracts.items()}
        return with_queues(contracts, self.runs, self.autopilot, self.runs_namespace)

    def kueue_flavors(self) -> list[SchedulingContract]:
        """The pools Kueue admits runs to, in the order it tries them; empty: the stack installs no Kueue
        (always on Autopilot, whose ladders are ComputeClasses)."""
        return [] if self.autopilot else kueue_flavors(self.runs, self.contracts())

    def compute_classes(self) -> dict[str, tuple[SchedulingContract, ...]]:
        """Each Autopilot ladder's ComputeClass by name, with its rungs' contracts in order; none on Standard."""
        return compute_classes(self.runs, self.contracts(), self.autopilot)

    def compute_class_renames(self) -> dict[str, str]:
        """Each Autopilot ladder's ComputeClass name -> its name before cluster-scoped names had a hash."""
        return compute_class_renames(self.runs, self.contracts(), self.autopilot)

    def pool_zones(self, pool: PoolConfig) -> tuple[str, ...]:
        return pool.zones or self.zones

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> StackConfig:
        """Validate a plain mapping (camelCase keys as in the stack file)."""
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            raise ConfigError(from_validation_error(err, cls)) from None
