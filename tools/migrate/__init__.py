"""`make migrate STACK=<stack> [RUN=<run>]`: copies what a stack deployed before the bucket's prefixes carried the
stack to where they carry it now (core/names.py), verified; the source is deleted only when asked.

    python -m tools.migrate --stack dev [--run gemma3-single-host] [--delete-source] [--root DIR]

`checkpoints/<run>/` -> `checkpoints/<stack>/<run>/` and `profiles/<run>/` -> `profiles/<stack>/<run>/` for each
run (or only `--run`), and, without `--run`, `datasets/<name>/` -> `datasets/<stack>/<name>/` for each dataset (its
staging record comes along, so the staging Job finds the files there and copies nothing). Each object is copied
by Cloud Storage itself (objects.rewrite, no bytes through this machine), then its destination's CRC32C (and MD5,
where both have one: a composite object has none) from the object metadata must be the source's. Resumable: an
object whose copy is there already, with the same checksum, is not copied again; an object there with other
content (written since by the run in its new place) is left alone and named. A progress bar on stderr.

Run it while the run is not writing (`make cancel STACK=<stack> RUN=<run>`, or after it ended): a checkpoint
written to the old prefix after the copy stays there, and the next `pulumi up` keeps the run on its old prefixes
as long as they hold more progress (components/bucket_preflight.py says so). Once copied, the next `pulumi up`
(`make resume`) moves the run to its new prefixes, and it resumes from the copied checkpoints.

Modules: plan.py says what is copied where (pure), copy.py copies and verifies with the google-cloud-storage
client (Application Default Credentials, or the emulator STORAGE_EMULATOR_HOST names), bar.py draws the
progress bar, __main__.py is the command line. Exit codes: 0 every object verified in its new place; 1 something
to run again or to look at (each named); 78 an invalid stack file or an unknown run.
"""
