"""Names the platform creates and the runs refer to. Pure data, no Pulumi import."""

# Kubernetes namespace holding the trainer service account, the Hugging Face
# token Secret and every run.
RUNS_NAMESPACE = "finetune"
# Kubernetes service account the trainer pods run as; Workload Identity maps it
# to the trainer Google service account.
TRAINER_KSA = "trainer"
# Kubernetes Secret holding the Hugging Face token, and its key.
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "token"

# Bucket layout. Runs read `datasets/` and write only below their own
# `checkpoints/<run>/` and `profiles/<run>/`.
DATA_PREFIX = "datasets"
CHECKPOINT_PREFIX = "checkpoints"
PROFILE_PREFIX = "profiles"

# Node label every accelerator pool carries with its logical pool name, so a
# run selects exactly its pool (all slices of it), whatever GKE names the
# node pools.
POOL_LABEL = "gke-finetune/pool"
