"""Resource inputs as the provider receives them: unknowns, secrets and numbers in their wire form.

The inputs come from the offline plan's capture (tools/offline.py, pulumi's
rpc deserialization) or from the policy pack (pulumi_policy, in `pulumi
preview`). A value not known yet (another resource's output at preview, or
one the mocks don't compute) is one of Pulumi's unknown sentinels, a
`pulumi.output.Unknown`, or absent; it is left to the engine, not judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Pulumi's wire sentinels for unknown values (pulumi/runtime/rpc.py UNKNOWN;
# pulumi_policy/proxy.py UNKNOWN_*_VALUE, one per type).
UNKNOWN_SENTINELS = frozenset({
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string (also rpc.UNKNOWN)
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
})
# A secret in the wire form: {SECRET_KEY: SECRET_SIG, "value": ...} (pulumi/runtime/rpc.py).
SECRET_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


class Unknown:
    """Stands for a value the engine knows only later (a URL part built from an unknown input)."""

    def __repr__(self) -> str:
        return "<unknown until created>"


UNKNOWN = Unknown()


def is_unknown(value: Any) -> bool:
    if value is None or isinstance(value, Unknown):
        return True
    if isinstance(value, str):
        return value in UNKNOWN_SENTINELS
    # pulumi.output.Unknown, recorded by the offline plan's preview mode (no Pulumi import here).
    return type(value).__name__ == "Unknown" and type(value).__module__.startswith("pulumi")


def wire(value: Any) -> Any:
    """`value` as the bridge hands it to the provider: secrets unwrapped, integral floats as ints.

    Pulumi's wire form carries every number as a double; the bridge makes a
    Terraform integer of it (a non-integral one stays a float, which the
    integer fields of Google's definition then refuse).
    """
    if isinstance(value, Mapping):
        if value.get(SECRET_KEY) == SECRET_SIG:
            return wire(value.get("value"))
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
