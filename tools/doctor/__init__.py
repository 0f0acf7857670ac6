"""`make doctor STACK=<stack>`: does this machine, this account and this project have what the stack's first
real `pulumi up` needs, and what to do for each miss. It only reads: programs' versions and login
state, GETs of Google Cloud's and the Hugging Face Hub's APIs, and testIamPermissions (which reads);
nothing is created or changed.

    python -m tools.doctor --stack a4 [--record answers.json | --answers answers.json]

The checks (tools/doctor/checks.py): the Pulumi CLI and its version; gcloud's account and the
Application Default Credentials; gke-gcloud-auth-plugin; an image builder (Docker with buildx, or
Cloud Build) where a trainer image is built; the project's APIs; the active identity's permissions for
every request the stack's `pulumi up` makes (permissions.py); the accelerator quota in the stack's
region for what its pools can scale to (quotas.py); the reservation a pool names (exists, in its zone, with its
machine type and free VMs); the stack's bucket (tools/doctor/bucket.py: an existing one's uniform access,
public access prevention and location, another stack of the same name, the runs `make migrate` would move;
the own one's name free); the Hugging Face token, and that it may read the gated models the runs
name. A stack on an existing cluster (tools/doctor/cluster_checks.py): its kubeconfig context answers, its
namespace exists (or the stack declares it), every right `make handoff` lists is the deployer's
(SelfSubjectAccessReview), the controllers it expects are installed and at which version, and the
namespace's Pod Security level and quotas admit its pods. `--record` writes every answer to a file (tokens replaced), `--answers` replays one: the tests
check each check against recorded answers. Exit codes: 0 nothing to fix, 1 something to fix (each
`MISS` says what), 78 an invalid stack file.
"""
