"""Commands for a run once `pulumi up` has submitted it: its logs, waiting for its end, cancelling and
resuming it (declared in the stack file), and one folder with what debugging it needs.

    python -m tools.runs logs    --stack <stack> --run <run> [--follow] [--pod <index>|all]
    python -m tools.runs cancel  --stack <stack> --run <run>      (resume: likewise)
    python -m tools.runs inspect --stack <stack> --run <run> [--out <dir>]

`make status ... WAIT=1` waits (tools/runs/wait.py). Each command reads the stack's own cluster
(tools/status/context.py), as `make status` does.
"""
