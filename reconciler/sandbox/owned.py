"""What the simulated controllers share: owner references, generated names, template hashes.

A controller finds what it owns by the ``ownerReferences`` entry with
``controller: true`` (the ControllerRef,
https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/),
names what it creates ``<owner>-<suffix>`` from the same consonant-and-digit alphabet
as Kubernetes' ``rand.SafeEncodeString`` (so ``pod-template-hash`` values look real),
and stamps every pod with its template's labels and annotations.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.copying import clone
from reconciler.sandbox.pods import FAIL_ANNOTATION

# Kubernetes' rand.SafeEncodeString alphabet: no vowels, no look-alike characters.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
CONTROLLER_MANAGER = "kube-controller-manager"


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def safe_hash(value: Any, length: int = 10) -> str:
    """A stable short hash of ``value`` in Kubernetes' alphabet."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:length])


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The ControllerRef a controller puts on what it creates."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def owned(items: list[dict[str, Any]], owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    uid = owner["metadata"]["uid"]
    return [o for o in items if controller_uid(o) == uid]


def alive(obj: Mapping[str, Any]) -> bool:
    return not obj["metadata"].get("deletionTimestamp")


def pod_from_template(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod body for ``owner`` from its pod template, as its controller creates it.

    The sandbox's failure switch on the workload itself (``sandbox.reconciler.dev/fail``
    in its own annotations, not its template's) is passed down to the pod, so a test can
    break a workload without changing its template.
    """
    meta = template.get("metadata") or {}
    annotations = dict(meta.get("annotations") or {})
    mark = (owner["metadata"].get("annotations") or {}).get(FAIL_ANNOTATION)
    if mark is not None:
        annotations.setdefault(FAIL_ANNOTATION, mark)
    pod_meta: dict[str, Any] = {
        "name": name,
        "namespace": owner["metadata"].get("namespace", ""),
        "labels": {**(meta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": {**clone(dict(template.get("spec") or {})), **(spec or {})},
    }


def int_or_percent(value: Any, total: int, *, round_up: bool, default: int) -> int:
    """``maxSurge``/``maxUnavailable``: an int, or ``"25%"`` of ``total`` rounded as told."""
    if value is None:
        return default
    if isinstance(value, int):
        return max(0, value)
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = int(text[:-1])
        except ValueError:
            return default
        scaled = percent * total
        return max(0, -(-scaled // 100) if round_up else scaled // 100)
    try:
        return max(0, int(text))
    except ValueError:
        return default


def replicas_of(spec: Mapping[str, Any], default: int = 1) -> int:
    value = spec.get("replicas", default)
    return value if isinstance(value, int) and value >= 0 else default


def condition(
    old: Mapping[str, Any],
    type_: str,
    status: str,
    reason: str,
    message: str,
    stamp: str,
    *,
    update: bool = False,
) -> dict[str, Any]:
    """A workload condition; ``lastTransitionTime`` moves only when ``status`` changes.

    ``lastUpdateTime`` (Deployments) moves when anything changes, or when ``update``
    says the controller made progress (what ``progressDeadlineSeconds`` measures from).
    """
    previous: Mapping[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == type_), {}
    )
    same_status = previous.get("status") == status
    unchanged = same_status and (previous.get("reason"), previous.get("message")) == (
        reason,
        message,
    )
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": previous.get("lastUpdateTime", stamp)
        if unchanged and not update
        else stamp,
        "lastTransitionTime": previous.get("lastTransitionTime", stamp) if same_status else stamp,
        "reason": reason,
        "message": message,
    }


def semantic(value: Any) -> Any:
    """``value`` without null, ``{}`` and ``[]`` members, recursively.

    Controllers compare templates as decoded Go structs (``apiequality.Semantic``), where
    an absent field, ``null`` and an empty struct are the same zero value: ``kubectl
    rollout undo`` sends ``creationTimestamp: null`` and ``resources: {}`` back, and the
    old ReplicaSet must still be recognised.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # the common leaves, told apart without an ABC check
    if kind is dict or isinstance(value, Mapping):
        cleaned = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value
