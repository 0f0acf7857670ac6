"""Run the whole Pulumi program offline, under the SDK's mocks, and return what it declared.

    from tools.offline import run_stack

    deployment = run_stack("dev")                       # Pulumi.dev.yaml as the CLI would load it
    pools = deployment.of_type("gcp:container/nodePool:NodePool")
    assert pools[0].inputs["placementPolicy"]["tpuTopology"] == "2x4"
    deployment.outputs["bucketUrl"]                     # resolved stack outputs

    run_stack("dev", overrides={"gke-finetune:pools": [...]})   # change keys (None removes one)
                                                        # (a `secure:` value of the stack file
                                                        # is still set, with a stand-in value)
    run_stack("dev", plain={"gke-finetune:hfToken": "x"}) # a key set in plain text
    run_stack("dev", root=Path("/tmp/other-checkout"))  # another tree's program and stack files

`run_stack` raises whatever the program raises (e.g. stack.problems.ConfigError);
`declared_before_error(...)` runs it expecting an error and returns both, to
check that nothing was declared. Config is set exactly as the CLI hands it to
a Python program: Pulumi.yaml defaults merged in, structured values as JSON
strings, secret keys flagged. Resource inputs are recorded in their wire
(camelCase) form, as the providers receive them, with the resource options
that matter here (protect, retainOnDelete, parent, provider, dependencies).

The tests (tests/support/pulumi_harness.py) and the offline plan (tools/plan/)
both use this module. The config map comes from the one reader of stack files
(stack/reader.py `file_values`), as the program's own config does.
"""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
from pulumi.runtime.mocks import MockMonitor

from core.names import PROJECT
from stack.reader import file_values, read_file
from tools import stacks

ROOT = Path(__file__).resolve().parents[1]
# No secret by default: the stacks hold none (the Hugging Face token is in Secret Manager, stack/secrets.py).
DEFAULT_SECRETS: dict[str, str] = {}
MOCK_PROJECT_NUMBER = "123456789012"
MOCK_EXISTING_ENDPOINT = "203.0.113.20"
# The value given to a `secure:` value of a stack file.
SECURE_STAND_IN = "offline-stand-in-for-an-encrypted-value"


def _stack_config(root: Path, stack: str) -> dict:
    return read_file(root / f"Pulumi.{stack}.yaml")


def shipped_stacks(root: Path = ROOT) -> tuple[str, ...]:
    """The shipped stacks that declare their own cluster (every part of the platform).

    Only the stacks the repository ships (tools/stacks.py `SHIPPED`): a user's own
    stack file is no example of the tests, the goldens or the e2e harness.
    """
    return tuple(s for s in stacks.shipped(root) if not _stack_config(root, s).get(f"{PROJECT}:existingCluster"))


def existing_cluster_stacks(root: Path = ROOT) -> tuple[str, ...]:
    """The shipped stacks for an existing cluster (stack/existing.py): only in-cluster parts, no node pool
    declared, so kept apart from the stacks whose every part the tests and the e2e harness build."""
    return tuple(s for s in stacks.shipped(root) if _stack_config(root, s).get(f"{PROJECT}:existingCluster"))


SHIPPED_STACKS = shipped_stacks()
EXISTING_CLUSTER_STACKS = existing_cluster_stacks()


@dataclass
class Declared:
    """One resource registration: its type token, name, inputs and options."""

    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    urn: str
    parent: str
    provider: str
    protect: bool
    retain_on_delete: bool
    dependencies: tuple[str, ...]
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    create_timeout: str = ""
    delete_timeout: str = ""
    delete_before_replace: bool = False
    import_id: str = ""  # the `import` option: an existing resource adopted


@dataclass
class Deployment:
    resources: list[Declared] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_token: str) -> list[Declared]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> Declared:
        matches = [r for r in self.resources if r.name == name]
        assert len(matches) == 1, f"{len(matches)} resources named {name!r}"
        return matches[0]

    def types(self) -> set[str]:
        return {r.type for r in self.resources}


class _Mocks(pulumi.runtime.Mocks):
    """Computed outputs GCP would return, derived from the inputs, so the program's
    Output plumbing (emails, endpoints, names) resolves to checkable strings."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        project = state.get("project", "mock-project")
        if args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{project}.iam.gserviceaccount.com"
            state.update(email=email, name=f"projects/{project}/serviceAccounts/{email}",
                         member=f"serviceAccount:{email}")
        elif args.typ == "gcp:container/cluster:Cluster":
            # What GKE computes: the IP and DNS-based endpoints, the CA, and (private nodes)
            # the Private Service Connect endpoint the control plane reaches the nodes from.
            state.update(endpoint="203.0.113.10", masterAuth={"clusterCaCertificate": "Q0EtREFUQQ=="})
            if "controlPlaneEndpointsConfig" in state:
                state["controlPlaneEndpointsConfig"].setdefault("dnsEndpointConfig", {})["endpoint"] = (
                    f"gke-mock-{state['name']}.{state['location']}.gke.goog")
            if "privateClusterConfig" in state:
                state["privateClusterConfig"] = {**state["privateClusterConfig"], "privateEndpoint": "10.0.0.2"}
            return f"projects/{project}/locations/{state['location']}/clusters/{state['name']}", state
        elif args.typ == "gcp:artifactregistry/repository:Repository":
            state.setdefault("name", state.get("repositoryId"))
        elif args.typ == "gcp:storage/bucketObject:BucketObject":
            # What Cloud Storage computes for an upload: the MD5 of what was sent.
            content = state.get("content")  # the provider marks it secret: a wrapped value in the mocks
            content = content.get("value", "") if isinstance(content, dict) else content or ""
            state["md5hash"] = state.get("sourceMd5hash") or _md5_base64(content)
        elif args.typ == "docker-build:index:Image":
            # A stand-in digest, stable per image tag, so runs resolve to a digest reference.
            import hashlib

            tag = (state.get("tags") or [args.name])[0]
            state["digest"] = "sha256:" + hashlib.sha256(tag.encode()).hexdigest()
        elif args.typ == "command:local:Command":
            import hashlib

            state["stdout"] = "sha256:" + hashlib.sha256(str(state.get("create")).encode()).hexdigest()
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "gcp:organizations/getProject:getProject":
            # A stand-in project number (the API's, in a real preview).
            return {"projectId": args.args.get("projectId"), "number": MOCK_PROJECT_NUMBER}
        if args.token == "gcp:container/getCluster:getCluster":
            # An existing cluster as GKE reports it: its IP endpoint and CA.
            return {"name": args.args.get("name"), "location": args.args.get("location"),
                    "endpoint": MOCK_EXISTING_ENDPOINT, "masterAuths": [{"clusterCaCertificate": "Q0EtREFUQQ=="}],
                    "controlPlaneEndpointsConfigs": [{"dnsEndpointConfigs": [
                        {"endpoint": f"gke-mock-{args.args.get('name')}.{args.args.get('location')}.gke.goog"}]}]}
        return {}


def _md5_base64(text: str) -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.md5(text.encode(), usedforsecurity=False).digest()).decode()


class _PreviewMocks(pulumi.runtime.Mocks):
    """What `pulumi preview` knows of a resource to be created: its inputs, no computed outputs
    (a cluster's endpoint, an image's digest), which the program then sees as unknown."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class _RecordingMonitor(MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks, sink: list[Declared]):
        super().__init__(mocks)
        self._sink = sink

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self._sink.append(
                Declared(
                    type=request.type,
                    name=request.name,
                    inputs=pulumi.runtime.rpc.deserialize_properties(request.object),
                    custom=request.custom,
                    urn=response.urn,
                    parent=request.parent,
                    provider=request.provider,
                    protect=request.protect,
                    retain_on_delete=request.retainOnDelete,
                    dependencies=tuple(request.dependencies),
                    ignore_changes=tuple(request.ignoreChanges),
                    replace_on_changes=tuple(request.replaceOnChanges),
                    create_timeout=request.customTimeouts.create,
                    delete_timeout=request.customTimeouts.delete,
                    delete_before_replace=request.deleteBeforeReplace,
                    import_id=request.importId,
                )
            )
        return response


def stack_config(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    plain: dict[str, str] | None = None,
    root: Path = ROOT,
) -> tuple[dict[str, str], list[str]]:
    """The config map and secret keys the CLI would pass for `Pulumi.<stack>.yaml`."""
    values = file_values(stack, root)
    for key, value in (overrides or {}).items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    secrets = dict(DEFAULT_SECRETS if secrets is None else secrets)
    # An encrypted value of the stack file (`secure: ...`) can't be decrypted
    # here: it is set as a secret with a stand-in value.
    secrets.update({k: SECURE_STAND_IN for k, v in values.items()
                    if isinstance(v, dict) and set(v) == {"secure"} and k not in secrets})
    values.update(secrets)
    values.update(plain or {})
    encoded = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return encoded, list(secrets)


def run_stack(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    plain: dict[str, str] | None = None,
    root: Path = ROOT,
    preview: bool = False,
) -> Deployment:
    """Run __main__.py for a stack under mocks; return its resources and outputs.

    preview=True runs it as `pulumi preview` would, with no computed outputs:
    what depends on one is unknown (`UNKNOWN` in the recorded inputs), and the
    outputs that depend on one are left out.
    """
    deployment = Deployment()
    _run(stack, deployment, overrides, secrets, plain, root, preview)
    return deployment


def declared_before_error(stack: str, **kwargs: Any) -> tuple[Deployment, BaseException]:
    """Run a stack expected to fail; return what had been declared and the error."""
    deployment = Deployment()
    try:
        _run(stack, deployment, kwargs.get("overrides"), kwargs.get("secrets"), kwargs.get("plain"),
             kwargs.get("root", ROOT))
    except Exception as err:  # noqa: BLE001 (the caller asserts on the type)
        return deployment, err
    raise AssertionError(f"stack {stack!r} ran without error")


def _run(stack, deployment, overrides, secrets, plain, root: Path = ROOT, preview: bool = False) -> None:
    config, secret_keys = stack_config(stack, overrides, secrets, plain, root)
    pulumi.runtime.set_all_config(config, secret_keys)
    mocks = _PreviewMocks() if preview else _Mocks()
    monitor = _RecordingMonitor(mocks, deployment.resources)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    exports: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        with mock.patch.object(pulumi, "export", side_effect=exports.__setitem__):
            runpy.run_path(str(root / "__main__.py"), run_name="__main__")
        return pulumi.Output.all(**exports).apply(deployment.outputs.update)

    program()
