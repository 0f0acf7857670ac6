"""The stack: every model of a stack file, every rule, the one reader of stack files.

Pydantic models, frozen and strict about unknown keys; problems reported as
`Problem(key, value, why, allowed)`, all at once, before any resource exists.
Imports the pure facts of `core/` only; no Pulumi import outside `reader`'s
Pulumi source.
"""
