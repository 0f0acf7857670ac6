"""Process exit codes shared by every trainer, and read by the run manifests.

The JobSet failure policy (manifests/jobset.py) keys on these: a configuration error
fails the run at once instead of burning restarts, while a pod that was told
to stop (SIGTERM on preemption or maintenance) is restarted and resumes.
"""

OK = 0
# sysexits.h EX_CONFIG: bad flags, unknown model or column, missing token.
# Retrying cannot fix these, so the failure policy fails the run on this code.
CONFIG_ERROR = 78
# sysexits.h EX_CANTCREAT: training succeeded, but the run's export (its `export:`) could not be
# written. The checkpoints are untouched; a restart resumes from the last one, which is the final
# step, and writes the export again.
EXPORT_FAILED = 73
# 128 + SIGTERM: the trainer saved a checkpoint and stopped because it was asked to.
TERMINATED = 143
