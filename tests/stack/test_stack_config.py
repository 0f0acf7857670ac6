"""Stack config: every shipped stack loads; each class of bad input is rejected, naming the key."""

import pytest
import yaml

from stack.config import ConfigError, StackConfig
from tests.support.pulumi_harness import ROOT, SHIPPED_STACKS, declared_before_error, stack_config

BASE = {"project": "my-project-id", "region": "us-east5", "zones": ["us-east5-b"]}


def config(**changes) -> StackConfig:
    return StackConfig.from_mapping({**BASE, **changes})


def problems(**changes) -> list[str]:
    with pytest.raises(ConfigError) as err:
        config(**changes)
    return err.value.problems


def pool(**fields) -> dict:
    return {"name": "p", "accelerator": "tpu-v6e", "topology": "1x1", **fields}


def test_all_six_example_stacks_ship():
    assert set(SHIPPED_STACKS) == {"dev", "tpu-multihost", "tpu-multislice", "tpu-queued", "a4", "autopilot"}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_shipped_stack_loads(stack):
    raw = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    values = {"project": raw["gcp:project"], "region": raw["gcp:region"], "stack": stack}
    values.update({k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("gke-finetune:")})
    cfg = StackConfig.from_mapping(values)
    assert cfg.accelerator_groups()


def test_minimal_standard_stack_has_only_the_system_pool():
    cfg = config()
    assert cfg.pools == () and cfg.mode == "standard" and cfg.deletion_protection


@pytest.mark.parametrize("changes, expected", [
    ({"pools": [pool(topology="3x3")]},
     "pools[0].topology: '3x3' is not a tpu-v6e topology; allowed: ['1x1', '2x2', '2x4'"),
    ({"pools": [pool(topology="2x4", machineType="ct6e-standard-1t")]},
     "pools[0].machineType: 'ct6e-standard-1t' does not fit tpu-v6e topology '2x4'"),
    ({"pools": [pool(accelerator="tpu-v9")]}, "pools[0].accelerator: 'tpu-v9' is unknown"),
    ({"pools": [pool(topology="1x1", slices=2)]}, "pools[0].slices: 2 needs a multi-host TPU slice"),
    ({"pools": [pool(topology="2x4", machineType="ct6e-standard-8t", slices=2)]}, "pools[0].slices: 2"),
    ({"pools": [pool(accelerator="nvidia-b200", topology=None, slices=2)]}, "pools[0].slices: 2"),
    ({"zones": ["us-west1-b"]}, "zones[0]: 'us-west1-b' is not a zone of region 'us-east5'"),
    ({"pools": [pool(zones=["europe-west4-a"])]}, "pools[0].zones[0]: 'europe-west4-a' is not a zone"),
    ({"pools": [pool(capacity="spot", reservation="r1")]},
     "pools[0].reservation: 'r1' can't be combined with capacity 'spot'"),
    ({"pools": [pool(capacity="flex-start", reservation="r1")]}, "pools[0].reservation: 'r1' can't be combined"),
    ({"pools": [pool(capacity="reservation")]}, "pools[0].reservation: not set, and capacity 'reservation' needs the reservation name"),
    ({"pools": [pool(capacity="queued", autoscaling={"minNodes": 1})]}, "pools[0].autoscaling.minNodes: 1 with capacity 'queued'"),
    ({"pools": [pool(capacity="paid")]}, "pools[0].capacity: 'paid'"),
    ({"pools": [pool(topology="4x4", autoscaling={"maxNodes": 2})]}, "pools[0].autoscaling: '0..2' nodes"),
    ({"pools": [pool(topology="2x4", machineType="ct6e-standard-4t", zones=["us-east5-a", "us-east5-b"])]},
     "pools[0].zones: ['us-east5-a', 'us-east5-b'] for multi-host"),
    ({"pools": [pool(slices=-1)]}, "pools[0].slices: -1"),
    ({"pools": [pool(autoscaling={"minNodes": -1})]}, "pools[0].autoscaling.minNodes: -1"),
    ({"systemNodeCount": 0}, "systemNodeCount: 0"),
    ({"pools": [pool(), pool()]}, "pools[1].name: 'p' is used twice"),
    ({"bucketName": "My_Bucket"}, "bucketName: 'My_Bucket' breaks GCS bucket naming"),
    ({"bucketName": "ab"}, "bucketName: 'ab' breaks GCS bucket naming; allowed: 3 to 63 characters"),
    ({"bucketName": "google-data"}, "bucketName: 'google-data' breaks GCS bucket naming"),
    ({"project": "My_Project"}, "gcp:project: 'My_Project' is not a project id"),
    ({"project": "abc"}, "gcp:project: 'abc' is not a project id"),
    ({"region": "useast"}, "gcp:region: 'useast' is not a region"),
    ({"mode": "autopilot", "pools": [pool()]}, "pools: '1 pool(s)' declared in autopilot mode; allowed: none"),
    ({"shapes": [pool()]}, "shapes: '1 shape(s)' declared in standard mode"),
    ({"mode": "serverless"}, "mode: 'serverless'"),
    ({"poolz": []}, "poolz: [] is an unknown key"),
    ({"pools": [pool(topolgy="2x2")]}, "pools[0].topolgy: '2x2' is an unknown key"),
    ({"images": {"gemma-jax": "us-docker.pkg.dev/p/r/gemma-jax:latest"}},
     "images.gemma-jax: 'us-docker.pkg.dev/p/r/gemma-jax:latest' is not a digest reference"),
    ({"images": {"trl-gpu": "trl:v1"}}, "images.trl-gpu: 'trl:v1' is not a digest reference"),
    ({"imageBuilder": "podman"}, "imageBuilder: 'podman' is not an image builder; allowed: docker | cloudbuild"),
])
def test_bad_input_is_rejected_naming_key_value_and_allowed(changes, expected):
    lines = problems(**changes)
    assert any(line.startswith(expected) for line in lines), lines


def test_every_problem_is_reported_at_once():
    lines = problems(project="X", zones=["us-west1-b"], bucketName="Bad_", typo=1,
                     pools=[pool(topology="3x3"), pool(name="q", capacity="spot", reservation="r")])
    assert len(lines) == 6, lines
    assert str(ConfigError(lines)).count("\n  - ") == 6


def test_digest_images_are_accepted():
    ref = "us-east5-docker.pkg.dev/my-project-id/finetune/gemma-jax@sha256:" + "a" * 64
    assert config(images={"gemma-jax": ref}).images.by_trainer() == {"gemma-jax": ref}


def test_derived_bucket_name_follows_the_stack():
    assert config(stack="Prod_EU").data_bucket == "my-project-id-prod-eu-finetune"


def test_machine_type_defaults_from_the_catalog():
    cfg = config(pools=[pool(topology="2x4")])
    assert cfg.pools[0].shape().machine_type == "ct6e-standard-8t"
    assert cfg.pools[0].max_nodes() == 1


def test_config_is_frozen():
    cfg = config()
    with pytest.raises(Exception):
        cfg.mode = "autopilot"


# --- through Pulumi config, as `pulumi up` reads it ----------------------------


def test_pulumi_yaml_declares_every_key_once_with_its_model_default():
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    model_keys = {f.alias or name for name, f in StackConfig.model_fields.items()} - {"project", "region", "stack"}
    assert set(declared) == model_keys | {"hfToken"}
    for name, field in StackConfig.model_fields.items():
        key = field.alias or name
        if key in declared:
            assert "description" in declared[key], key
            default = field.get_default(call_default_factory=True)
            expected = default.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(default, "model_dump") else default
            if default is None and declared[key].get("type") == "object":
                expected = {}  # an optional object (existingCluster): declared empty, read as absent
                assert StackConfig.model_validate({"project": "my-project-id", "region": "us-east5",
                                                   key: {}}).model_dump()[name] is None, key
            assert declared[key]["default"] == (list(expected) if isinstance(expected, tuple) else expected), key
    # The retired key: untyped, empty default, so the CLI hands an old value to the program, which refuses it.
    assert declared["hfToken"]["default"] == "" and "type" not in declared["hfToken"]


CLI_TYPES = {"string", "integer", "boolean", "array", "object"}  # project.json simpleConfigType


def cli_accepts(type_name, items, value):
    """pulumi/pulumi sdk/go/common/workspace/project.go ValidateConfigValue, for YAML values."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and items is not None and all(
        cli_accepts(items["type"], items.get("items"), v) for v in value)


def test_pulumi_yaml_types_are_ones_the_cli_accepts():
    for key, decl in yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"].items():
        if "type" in decl:
            assert decl["type"] in CLI_TYPES, key
            assert decl["type"] != "array" or decl["items"]["type"] in CLI_TYPES, key
            assert cli_accepts(decl["type"], decl.get("items"), decl["default"]), key


def test_structured_keys_are_typed_so_the_cli_rejects_a_wrong_shape():
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    for key in ("pools", "shapes", "runs"):
        assert declared[key]["type"] == "array" and declared[key]["items"] == {"type": "object"}, key
    assert declared["images"]["type"] == "object"
    assert not cli_accepts("array", {"type": "object"}, ["v6e-1x1"])  # a pool given as a bare name
    assert not cli_accepts("object", None, ["gemma-jax@sha256:..."])
    for stack in SHIPPED_STACKS:  # and every shipped stack passes the CLI's check
        stack_values = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        for key, decl in declared.items():
            value = stack_values.get(f"gke-finetune:{key}")
            if value is not None and "type" in decl:
                assert cli_accepts(decl["type"], decl.get("items"), value), (stack, key)


@pytest.mark.parametrize("kwargs, expected", [
    ({"overrides": {"gke-finetune:pools": [pool(topology="3x3", zones=["us-east5-b"])]}}, "pools[0].topology"),
    ({"overrides": {"gke-finetune:typo": "x"}}, "typo: 'x' is an unknown key"),
    ({"plain": {"gke-finetune:hfToken": "hf_plain"}}, "hfToken: '[plain text]' is stored in plain text"),
    ({"secrets": {"gke-finetune:hfToken": "hf_x"}}, "hfToken: '[secret]' is a Pulumi secret"),
    ({"overrides": {"gke-finetune:hfTokenSecret": "hf token"}}, "hfTokenSecret: 'hf token' is not a Secret Manager secret"),
    ({"overrides": {"gcp:project": "Bad Project"}}, "gcp:project: 'Bad Project'"),
    ({"overrides": {"gke-finetune:mode": "autopilot"}}, "pools: '1 pool(s)' declared in autopilot mode"),
    ({"overrides": {"gke-finetune:imageBuilder": "kaniko"}},
     "imageBuilder: 'kaniko' is not an image builder; allowed: docker | cloudbuild"),
])
def test_bad_stack_fails_before_any_resource_is_declared(kwargs, expected):
    declared, err = declared_before_error("dev", **kwargs)
    assert isinstance(err, ConfigError), err
    assert any(p.startswith(expected) for p in err.problems), err.problems
    assert declared.resources == []


def test_harness_passes_structured_values_as_json_like_the_cli():
    values, secret_keys = stack_config("tpu-multislice")
    assert values["gke-finetune:pools"].startswith("[{")
    assert values["gke-finetune:mode"] == "standard"
    assert secret_keys == []  # the stacks hold no secret


def test_runs_are_checked_against_the_pools_they_name():
    lines = problems(pools=[pool()], runs=[{"name": "r1", "trainer": "trl-gpu", "pool": "nope"}])
    assert any("'nope'" in line and "r1" in line for line in lines), lines
