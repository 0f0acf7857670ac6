"""Image references: runs pull their trainer image by digest, never by tag.

A tag can move under a running JobSet (a restart would then train with other
code than the one reviewed); a digest cannot.
"""

from __future__ import annotations

from core.syntax import IMAGE_DIGEST_REF


class ImageError(ValueError):
    """An image reference that is not pinned by digest."""


def image_problem(ref: str) -> str | None:
    """Why `ref` is not an acceptable image reference, or None when it is."""
    if IMAGE_DIGEST_REF.fullmatch(ref):
        return None
    return f"image {ref!r} must be pinned by digest (<registry>/<repository>@sha256:<64 hex digits>), not a tag"


def require_digest(ref: str) -> str:
    problem = image_problem(ref)
    if problem:
        raise ImageError(problem)
    return ref
