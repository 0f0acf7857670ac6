"""`make status STACK=<stack> [RUN=<run>]`: where each run of a stack is, what it has done and cost.

    python -m tools.status show --stack tpu-queued [--run gemma3-ladder] [--json] [--watch [SECONDS]]
        [--context CTX | --from-json DUMP] [--progress-dir DIR]

One line per run, then the details of one (`--run`, or the only run). The cluster is read with the
Kubernetes client through the stack's own kubeconfig context, never the current one
(tools/status/context.py: an existing cluster's `existingCluster.context`, else the context
`gcloud container clusters get-credentials` writes for the stack's cluster; --context names
another), or from a `kubectl get jobsets,workloads,provisioningrequests,pods -n <namespace> -o
json` dump (--from-json); the progress records from the stack's bucket with the Cloud Storage
client, or from a local directory laid out as the bucket (--progress-dir). The first line says
which context and namespace were read (on stderr with --json). Nothing runs in the cluster for it.

The modules: context.py says which kubeconfig context is the stack's own cluster; sources.py reads
the cluster's objects and the runs' progress records (Kubernetes and Cloud Storage clients, or a
`kubectl -o json` dump and a local directory); phase.py and row.py compute each run's phase,
progress, goodput and money from plain dicts, clock.py the interval it is measured over; model.py
holds the row type and validates the records the trainers write; table.py makes the rows and
renders them; __main__.py is the command line.

Exit codes (sysexits): 0; 66 the stack has nothing deployed, or no such run; 69 the cluster cannot
be reached; 78 the stack file is invalid, or the kubeconfig has no context for the stack's cluster
(the message says the `gcloud container clusters get-credentials` command that writes it).
"""
