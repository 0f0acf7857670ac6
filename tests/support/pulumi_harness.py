"""Run the whole Pulumi program offline, under the SDK's mocks, and return what it declared.

    from tests.support.pulumi_harness import run_stack

    deployment = run_stack("dev")                       # Pulumi.dev.yaml as the CLI would load it
    pools = deployment.of_type("gcp:container/nodePool:NodePool")
    assert pools[0].inputs["placementPolicy"]["tpuTopology"] == "2x4"
    deployment.outputs["bucketUrl"]                     # resolved stack outputs

The engine lives in tools/offline.py, shared with the offline plan (`make plan`);
see its docstring for every option.
"""

from tools.offline import (  # noqa: F401 (re-exported for the tests)
    DEFAULT_SECRETS,
    EXISTING_CLUSTER_STACKS,
    PROJECT,
    ROOT,
    SHIPPED_STACKS,
    Declared,
    Deployment,
    declared_before_error,
    run_stack,
    stack_config,
)
