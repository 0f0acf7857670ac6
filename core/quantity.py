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


_DECIMAL_SUFFIXES = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}


def canonical_millis(millis: int) -> str:
    """A whole number of thousandths (millicores) as the API server writes it back: the largest decimal
    suffix that keeps it whole (`354000m` is `354`, `179500m` stays). k8s.io/apimachinery
    pkg/api/resource/quantity.go `CanonicalizeBytes` (DecimalSI)."""
    if millis == 0:
        return "0"
    number, exponent = millis, -3
    while number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    return f"{number}{_DECIMAL_SUFFIXES[exponent]}"


def canonical_bytes(count: int) -> str:
    """A whole number of bytes as the API server writes back a binary quantity: the largest binary suffix
    that keeps it whole (`10956800Mi` is `10700Gi`); under 1024, plain. quantity.go `CanonicalizeBytes` (BinarySI)."""
    if count < 1024:
        return str(count)
    number, exponent = count, 0
    while number % 1024 == 0 and exponent < 60:
        number, exponent = number // 1024, exponent + 10
    return f"{number}{_BINARY_SUFFIXES[exponent]}"
