"""The platform's Pulumi components, and the pure data they are built from.

`accelerators` and `scheduling` import nothing from Pulumi: workloads/, the
offline plan and tests use them as plain data.
"""
