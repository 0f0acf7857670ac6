"""A run's model, after training: `make download`, `make generate`.

    python -m tools.model download --stack <stack> --run <run> [--dir DIR] [--checkpoint STEP] [--force]
    python -m tools.model generate --dir DIR --prompt TEXT [--max-new-tokens N] [--device cpu|cuda|auto]

download.py brings a run's export (`exports/<stack>/<run>/`, complete only with its marker:
trainers/export_dir.py), or one of its checkpoints, from the stack's bucket to this machine with the
Cloud Storage client: a progress bar, each file's CRC32C (or MD5) checked against the object's,
resumable (a file already there whole is skipped, a partial one continued), nothing overwritten without
--force. generate.py loads an exported directory with transformers (in .venv-gpu, where torch and
transformers are), applies its chat template and streams the tokens as they come. Exit codes: 0; 66 nothing to
download or load (no export yet, no such run); 69 the bucket cannot be reached; 73 a
file whose checksum does not match; 78 bad input (the stack, a directory that would be overwritten).
"""
