"""Decide, without a request, whether a live object already matches what we apply.

Apply never writes an object whose live state matches (ARCHITECTURE habit 2),
so a no-op pass costs one list per kind and no writes. "Matches" means two
things, both checked here on plain dicts:

* the live object holds every field we set, with equal values once the API
  server's normalisations are undone (quantities ``0.5``/``"500m"``, int/str
  ports, Secret ``stringData``; lists of named items matched by key, so items
  added by other managers or defaulted fields do not count as drift);
* the manifest is the one we applied last time (its :func:`fingerprint` is in
  the inventory), which catches fields removed from Git that a subset check
  cannot see.

``apply`` and ``diff`` call :func:`matches`; ``diff`` also uses
:func:`display_form` and :func:`overlay` to print what would change.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

# Candidate merge keys for lists of objects, most specific first; the first one
# every item has, with distinct values, identifies items (containers by name,
# volumeMounts by mountPath when names repeat, Service ports by port, ...).
_MERGE_KEYS = (
    "name",
    "mountPath",
    "containerPort",
    "port",
    "devicePath",
    "ip",
    "key",
    "type",
    "topologyKey",
)
_VOLATILE_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
)
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def comparable(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The desired object as the API server will store it, minus what apply ignores.

    Secret ``stringData`` becomes base64 ``data`` (a real server never stores
    ``stringData``); this is also the form ``KubeClient.apply`` sends.
    """
    # shallow: nothing below the top level is modified, and this runs for every object
    obj = {k: v for k, v in desired.items() if k != "status"}
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1" and obj.get("stringData"):
        data = dict(obj.get("data") or {})
        for key, value in (obj.pop("stringData") or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data
    return obj


def fingerprint(desired: Mapping[str, Any]) -> str:
    """A short stable hash of a manifest, recorded in the inventory after apply."""
    text = json.dumps(comparable(desired), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def matches(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """True when applying ``desired`` would change nothing we manage in ``live``."""
    if live is None:
        return False
    return is_subset(comparable(desired), live)


def is_subset(desired: Any, live: Any) -> bool:
    """Every field of ``desired`` is in ``live`` with an equivalent value."""
    if desired is None:
        return True  # a null in an apply configuration claims nothing
    if isinstance(desired, Mapping):
        if live is None:
            return all(_is_empty(v) for v in desired.values())
        if not isinstance(live, Mapping):
            return False
        return all(
            v is None or (k in live and is_subset(v, live[k])) or (k not in live and _is_empty(v))
            for k, v in desired.items()
        )
    if isinstance(desired, list):
        if live is None:
            return not desired
        return isinstance(live, list) and _list_subset(desired, live)
    return scalars_equal(desired, live)


def scalars_equal(a: Any, b: Any) -> bool:
    """Equality that forgives the API server's normalisations of scalars."""
    if a == b and type(a) is type(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, int | float | str) and isinstance(b, int | float | str):
        if str(a) == str(b):
            return True  # int-or-string fields such as targetPort: 8080 / "8080"
        qa, qb = parse_quantity(a), parse_quantity(b)
        return qa is not None and qa == qb
    return bool(a == b)


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource quantity (``500m``, ``1Gi``, ``0.5``, ``1e3``) as a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip())
    if not m:
        return None
    try:
        number = Decimal(m.group(1))
        if m.group(2):
            return number * Decimal(f"1{m.group(2)}")
        return number * _SUFFIX[m.group(3) or ""]
    except InvalidOperation:
        return None


def merge_key(items: Sequence[Any]) -> str | None:
    """The field identifying items of a list of objects, or None for positional lists."""
    if not items or not all(isinstance(i, Mapping) for i in items):
        return None
    for key in _MERGE_KEYS:
        values = [str(i.get(key)) for i in items if key in i]
        if len(values) == len(items) and len(set(values)) == len(values):
            return key
    return None


def display_form(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """An object without server bookkeeping, for printing diffs."""
    if obj is None:
        return {}
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in _VOLATILE_METADATA:
            meta.pop(key, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
            if not annotations:
                meta.pop("annotations")
    return out


def overlay(live: Any, desired: Any) -> Any:
    """``live`` with ``desired`` merged in: an offline stand-in for a dry-run apply."""
    if desired is None:
        return copy.deepcopy(live)
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        merged = {k: copy.deepcopy(v) for k, v in live.items()}
        for key, value in desired.items():
            merged[key] = overlay(live.get(key), value)
        return merged
    if isinstance(desired, list) and isinstance(live, list):
        key = merge_key(desired)
        if key is not None and merge_key(live) == key:
            by_key = {str(i.get(key)): i for i in live}
            return [overlay(by_key.get(str(i.get(key))), i) for i in desired]
        return copy.deepcopy(desired)
    return copy.deepcopy(desired)


def _list_subset(desired: list[Any], live: list[Any]) -> bool:
    key = merge_key(desired)
    if key is not None:
        live_by_key = {str(i.get(key)): i for i in live if isinstance(i, Mapping)}
        return all(
            str(item.get(key)) in live_by_key and is_subset(item, live_by_key[str(item.get(key))])
            for item in desired
        )
    if len(desired) != len(live):
        return False
    return all(is_subset(d, v) for d, v in zip(desired, live, strict=True))


def _is_empty(value: Any) -> bool:
    return value is None or value == {} or value == []
