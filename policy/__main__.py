"""gke-finetune's admission rules, enforced by the Pulumi engine.

    pulumi preview --policy-pack policy      # from the project directory

The pack runs in its own Python environment (policy/requirements.txt); the
rules come from this repository's admission/ and core/ packages, which the
pack puts on its path from its own location.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import (  # noqa: E402 (after the repository is on the path)
    EnforcementLevel,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

from policy import rules  # noqa: E402

PolicyPack(
    name="gke-finetune-admission",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="jobset-names-and-labels",
            description="JobSet names, labels, selectors and annotations follow Kubernetes' syntax rules.",
            validate=rules.validate_jobset_syntax,
        ),
        ResourceValidationPolicy(
            name="gke-node-pool-rules",
            description="Node pools GKE creates: TPU placement, multi-host autoscaling, capacity options.",
            validate=rules.validate_node_pool,
        ),
        ResourceValidationPolicy(
            name="google-api-definitions",
            description="The request each Google Cloud resource becomes passes Google's definition of the API method.",
            validate=rules.validate_google_api,
        ),
        StackValidationPolicy(
            name="runs-fit-their-nodes",
            description="Every run's pod fits its node's allocatable; on Autopilot, what Autopilot admits.",
            validate=rules.validate_runs_fit,
        ),
    ],
)
