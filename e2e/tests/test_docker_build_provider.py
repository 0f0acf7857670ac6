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
