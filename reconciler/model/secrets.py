"""Secret values are never printed: the masks ``diff``, ``render`` and ``preview`` use.

A diff still has to say *that* a value changed (a reviewer must see a rotated
key), so a pair of objects is masked together: unchanged values read ``***``
on both sides, changed ones ``***`` before and ``*** (changed)`` after, like
``kubectl diff`` hides values while still showing which keys moved. Keys stay
visible; only values are hidden. ``--show-secrets`` skips the masks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MASK = "***"
CHANGED = "*** (changed)"
VALUE_FIELDS = ("data", "stringData")


def is_secret(obj: Mapping[str, Any] | None) -> bool:
    return obj is not None and obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"


def mask_secret(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` with every Secret value replaced by ``***`` (others as they are)."""
    if not is_secret(obj):
        return dict(obj)
    out = dict(obj)
    for key in VALUE_FIELDS:
        values = obj.get(key)
        if isinstance(values, Mapping):
            out[key] = {k: MASK for k in values}
    return out


def mask_secret_pair(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Mask both sides of a diff; a value that differs reads ``*** (changed)`` after.

    ``stringData`` on one side is compared with the decoded ``data`` of the other
    only through the field it sits in: the API server folds ``stringData`` into
    ``data``, so a live object and a dry-run answer both carry ``data``.
    """
    if not is_secret(before) and not is_secret(after):
        return (dict(before) if before else None), (dict(after) if after else None)
    masked_before = mask_secret(before) if before else None
    if not after:
        return masked_before, None
    masked_after = dict(after)
    for key in VALUE_FIELDS:
        values = after.get(key)
        if not isinstance(values, Mapping):
            continue
        old = (before or {}).get(key)
        old_values = old if isinstance(old, Mapping) else {}
        masked_after[key] = {
            k: MASK if k in old_values and old_values[k] == v else CHANGED
            for k, v in values.items()
        }
    return masked_before, masked_after
