"""Label and field selectors for list, watch and deletecollection.

Follows https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
(``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``) and
https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
(every kind: ``metadata.name`` and ``metadata.namespace``; the built-in kinds of its
"List of supported fields" table: their fields too; any other field is a 400, as on a
real API server; custom resources and ``events.k8s.io`` Events are not checked: their
selectable fields are declared elsewhere). Used by ``server.py`` and by the
controllers (``status.selector`` of a scale subresource).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.sandbox.apierrors import ApiError

Matcher = Callable[[Mapping[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


def _split_requirements(text: str) -> list[str]:
    """Split on commas that are not inside ``( )`` of a set requirement."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _label_requirement(text: str) -> Callable[[Mapping[str, str]], bool]:
    if match := _SET_RE.match(text):
        if match.group(1):
            raise ApiError(400, f"unable to parse requirement: {text!r}")
        key, op = match.group(2), match.group(3)
        values = {v.strip() for v in match.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQ_RE.match(text):
        key, op, value = match.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS_RE.match(text):
        negate, key = match.groups()
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise ApiError(400, f"unable to parse requirement: {text!r}")


def parse_label_selector(text: str | None) -> Matcher:
    """A predicate over whole objects that checks ``metadata.labels``."""
    if not text:
        return lambda obj: True
    requirements = [_label_requirement(part) for part in _split_requirements(text)]

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    return "" if current is None else str(current)


# https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
# #list-of-supported-fields: (group, kind) -> what it supports besides the two every
# kind does
EVERY_KIND = ("metadata.name", "metadata.namespace")
SUPPORTED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    ("", "Event"): (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("", "Secret"): ("type",),
    ("", "Namespace"): ("status.phase",),
    ("apps", "ReplicaSet"): ("status.replicas",),
    ("", "ReplicationController"): ("status.replicas",),
    ("batch", "Job"): ("status.successful",),
    ("", "Node"): ("spec.unschedulable",),
    ("certificates.k8s.io", "CertificateSigningRequest"): ("spec.signerName",),
}
# whose selectable fields this table does not know: every field is taken
_UNCHECKED_GROUPS = frozenset({"events.k8s.io"})


def supported_fields(group: str, kind: str, crd: bool = False) -> tuple[str, ...] | None:
    """The fields ``kind`` can be selected by, None when any field is taken."""
    if crd or group in _UNCHECKED_GROUPS:
        return None
    return EVERY_KIND + SUPPORTED_FIELDS.get((group, kind), ())


def parse_field_selector(text: str | None, supported: tuple[str, ...] | None = None) -> Matcher:
    """A predicate over whole objects for ``fieldSelector``; a field not in
    ``supported`` (when given) is a 400, with the message a real server answers."""
    if not text:
        return lambda obj: True
    checks: list[tuple[str, bool, str]] = []
    for part in _split_requirements(text):
        match = _EQ_RE.match(part)
        if not match:
            raise ApiError(400, f"invalid field selector: {part!r}")
        path, op, value = match.groups()
        if supported is not None and path not in supported:
            known = ", ".join(f'"{f}"' for f in supported)
            raise ApiError(400, f'"{path}" is not a known field selector: only {known}')
        checks.append((path, op != "!=", value))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) == equal for path, equal, value in checks)

    return matches


def selector_to_string(selector: Mapping[str, Any] | None) -> str:
    """Render a ``LabelSelector`` (matchLabels/matchExpressions) in query syntax."""
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
