"""The offline plan: what `pulumi up` would declare for a stack, with no CLI and no credentials.

    make plan STACK=dev                        # python -m tools.plan show --stack dev
    make plan-diff BASE=origin/main STACK=dev  # python -m tools.plan diff --base origin/main --stack dev

`show` runs the real program (__main__.py) for Pulumi.<stack>.yaml under the
SDK's mocks (tools/offline.py, the engine the tests use) and prints every
resource it declares as a tree (type, name, key inputs), secrets masked; then,
per accelerator pool and run, chips, VMs, slices and the on-demand list price
from the catalog with its date, and a total; and writes the run manifests
(the dicts the program applies, rendered by tools/render.py) under
plan/<stack>/manifests/. A stack that fails validation prints the problems
and exits 1.

`diff` plans the stack in this tree and in another git ref (checked out with
`git worktree add` into a temporary directory, planned by that tree's own plan
tool against its program and stack files) and prints what the change adds,
removes and modifies, input by input: the offline counterpart of
`pulumi preview --diff`.

The modules: collect.py runs the program and collects the plan as JSON-ready
data; show.py renders it (with tree.py, the resource tree; cost.py, the cost
and fit tables; hbm.py, the accelerator memory; memory.py, each run's model on
its pool's chips; google_api.py, each Google Cloud request judged by Google's
API definitions) and writes the manifests; ref.py plans another git ref;
diff.py compares two plans; __main__.py is the command line.
"""
