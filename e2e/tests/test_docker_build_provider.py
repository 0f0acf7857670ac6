"""The docker-build provider built here is the released one: its schema is the published schema.json.

Two packages the provider imports only to describe SDK generation for other
languages are refused by the Go module proxy and replaced by stand-ins
(e2e/tools/docker-build/standin/). What they feed is the schema's `language`
section; everything the engine uses to check, diff, create and update an
image comes from the provider's own code. The provider's GetSchema, asked over
its gRPC interface, equals the schema the release publishes (copied from the
same module zip), language section included, and its version is the pin.
"""

from __future__ import annotations

import json
import subprocess

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from e2e.harness.tools import tools

VERSION = "0.0.22"  # requirements.txt's pulumi-docker-build


def test_the_built_provider_serves_the_published_schema_at_the_pinned_version():
    built = tools().dirs["docker-build"]
    published = json.loads((built / "schema" / "schema.json").read_text())
    provider = subprocess.Popen([str(built / "bin" / "pulumi-resource-docker-build")], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(provider.stdout.readline().strip())  # a plugin prints its port first
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            assert stub.GetPluginInfo(empty_pb2.Empty(), timeout=30).version == VERSION
            served = json.loads(stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=30).schema)
    finally:
        provider.terminate()
        provider.wait(timeout=10)
    assert served.pop("version") == VERSION
    published.pop("version", None)
    assert served["language"] == published["language"]
    assert served == published


def _create(built, context_dir, env: dict, preview: bool) -> provider_pb2.CreateResponse:
    """The provider's Check then Create of one image as components/images.py declares it (buildOnPreview
    false), as `pulumi preview` (preview=True) or `pulumi up` asks for it."""
    from google.protobuf import struct_pb2

    provider = subprocess.Popen([str(built / "bin" / "pulumi-resource-docker-build")], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
    urn = "urn:pulumi:test::gke-finetune::docker-build:index:Image::trainer"
    inputs = struct_pb2.Struct()
    inputs.update({"context": {"location": str(context_dir)}, "push": False, "tags": ["127.0.0.1:1/t:src-1"],
                   "dockerfile": {"location": str(context_dir / "Dockerfile")},
                   "buildOnPreview": False, "exec": True})
    try:
        port = int(provider.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            stub.Configure(provider_pb2.ConfigureRequest(args=struct_pb2.Struct(), acceptSecrets=True,
                                                         acceptResources=True), timeout=30)
            checked = stub.Check(provider_pb2.CheckRequest(urn=urn, news=inputs, olds=struct_pb2.Struct()),
                                 timeout=60)
            assert not checked.failures, checked.failures
            return stub.Create(provider_pb2.CreateRequest(urn=urn, properties=checked.inputs, preview=preview),
                               timeout=120)
    finally:
        provider.terminate()
        provider.wait(timeout=10)


def test_a_preview_of_an_image_needs_no_docker_engine(tmp_path):
    """components/images.py's images, with DOCKER_HOST naming a socket that doesn't exist: the preview's
    Create plans the image (its outputs unknown until `up`), and `up`'s Create, which builds, fails on the
    missing engine — so the check can fail, and what needs the engine is `up` alone."""
    import os

    built = tools().dirs["docker-build"]
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY a /a\n")
    (tmp_path / "a").write_text("a\n")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}", "DOCKER_CONFIG": str(tmp_path)}
    planned = _create(built, tmp_path, env, preview=True)
    assert "contextHash" in planned.properties.fields and "digest" in planned.properties.fields
    try:
        _create(built, tmp_path, env, preview=False)
    except grpc.RpcError as err:
        assert "no-engine.sock" in (err.details() or ""), err.details()
    else:
        raise AssertionError("an image was built with no Docker engine")
