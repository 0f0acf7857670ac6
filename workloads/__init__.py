"""Run manifests as data: pure functions from a run and its pool's contract to dicts.

Nothing here imports Pulumi. The same dicts become Pulumi resources (infra/)
and YAML files for review, golden tests and scanners.
"""
