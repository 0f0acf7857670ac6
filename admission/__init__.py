"""Would GKE admit and schedule this? Rules of the real systems, checked offline.

Pure functions over the manifests (dicts) the platform builds and the
resources it declares, each rule citing its source: syntax (Kubernetes'
own name and label rules), fit (a pod's requests against its node's
allocatable), Autopilot's admission rules, and GKE's node pool rules. The
program runs them before declaring anything, `make plan` prints the fit,
and the policy pack (policy/) runs the same functions in `pulumi preview`.
"""
