"""Run manifests as data: pure functions from a run and its pool's contract to dicts.

Nothing here imports Pulumi. The same dicts become Pulumi resources
(components/) and YAML files for review, golden tests, scanners and policies.
"""
