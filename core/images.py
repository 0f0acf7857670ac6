"""Image references: runs pull their trainer image by digest, never by tag.

A tag can move under a running JobSet (a restart would then train with other
code than the one reviewed); a digest cannot. The stack's reader refuses any
other reference (stack/runs.py, stack/own_container.py, stack/models.py `Images`).
"""

from __future__ import annotations

from core.syntax import IMAGE_DIGEST_REF


def image_problem(ref: str) -> str | None:
    """Why `ref` is not an acceptable image reference, or None when it is."""
    if IMAGE_DIGEST_REF.fullmatch(ref):
        return None
    return f"image {ref!r} must be pinned by digest (<registry>/<repository>@sha256:<64 hex digits>), not a tag"
