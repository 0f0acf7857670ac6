"""Pure facts: the accelerator catalog, the trainer table, the scheduling-contract type,
names, ids, syntax rules and pinned versions.

Nothing here imports pydantic or Pulumi; every other layer reads these.
"""
