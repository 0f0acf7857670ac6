"""Kubernetes resource quantities ("500m", "64Gi", "1200Gi", "4") as numbers, and back.

The suffixes of k8s.io/apimachinery/pkg/api/resource (Quantity): binary
Ki..Ei, decimal k..E, and milli `m`.
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
"""

from __future__ import annotations

import re
from decimal import Decimal

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": Decimal("0.001"), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^(?P<number>[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")

GIB = 2**30


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse(quantity: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes)."""
    if isinstance(quantity, (int, float)):
        return Decimal(str(quantity))
    match = _QUANTITY.match(quantity.strip())
    if not match:
        raise QuantityError(f"{quantity!r} is not a Kubernetes quantity")
    suffix = match.group("suffix") or ""
    scale = _BINARY.get(suffix) or _DECIMAL[suffix]
    return Decimal(match.group("number")) * Decimal(scale)


def gib(quantity: str | int | float) -> float:
    """A byte quantity in GiB."""
    return float(parse(quantity) / GIB)


def show_bytes(value: float | Decimal) -> str:
    """Bytes for a person: `43.8Gi`."""
    return f"{float(value) / GIB:.1f}Gi"


def show_cpu(value: float | Decimal) -> str:
    """Cores for a person: `3.92`."""
    return f"{float(value):.2f}"
