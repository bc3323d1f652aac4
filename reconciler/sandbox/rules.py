"""Semantic validation a real API server does after the shape checks: 422 with causes.

``validation.py`` checks shapes (a string where a string belongs); this module checks
the rules a real cluster enforces on well-shaped objects, collecting every violation
into one ``422 Invalid`` whose ``details.causes[].field`` name the paths, as
https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation and
the API conventions describe. Immutable fields are checked against the stored object:
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#label-selector-updates,
https://kubernetes.io/docs/concepts/configuration/configmap/#configmap-immutable,
https://kubernetes.io/docs/concepts/services-networking/service/ (clusterIP).
No finalizer may be added to an object being deleted:
https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/.
A Lease's ``leaseDurationSeconds`` must be positive and its ``leaseTransitions`` not
negative (``ValidateLeaseSpec`` in kubernetes/kubernetes
``pkg/apis/coordination/validation``; the fields are those of
https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/lease-v1/):
leader election and shards must never write a Lease that expires at once.
``api.py`` calls :func:`check_rules` on every create and update of the main resource.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.selectors import parse_label_selector, selector_to_string

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SELECTED = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"})
_WITH_PODS = frozenset({*_SELECTED, "Job", "CronJob"})
Cause = dict[str, str]


def _map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a map, else empty: shapes are not this module's business."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


def _invalid(field: str, value: Any, why: str) -> Cause:
    return _cause("FieldValueInvalid", field, f"Invalid value: {json.dumps(value)}: {why}")


def label_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``[prefix/]name``), empty when it is."""
    prefix, _, name = key.rpartition("/")
    errors = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        errors.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "must start and end with an alphanumeric character and be at most 63 long"
        )
    return errors


def _labels(labels: Any, where: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(labels, Mapping):
        return causes
    for key, value in labels.items():
        for why in label_key_errors(str(key)):
            causes.append(_invalid(f"{where}", key, why))
        if isinstance(value, str) and value and (len(value) > 63 or not _NAME.match(value)):
            causes.append(
                _invalid(
                    f"{where}",
                    value,
                    "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', start and end with an alphanumeric "
                    "character and be at most 63 characters",
                )
            )
    return causes


def _port(value: Any, field: str) -> list[Cause]:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return []
    return [_invalid(field, value, "must be between 1 and 65535, inclusive")]


def _pod_spec(spec: Any, where: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(spec, Mapping):
        return causes
    for group in ("initContainers", "containers"):
        for i, container in enumerate(_list(spec.get(group))):
            if not isinstance(container, Mapping):
                continue
            at = f"{where}.{group}[{i}]"
            if not container.get("image"):
                causes.append(_cause("FieldValueRequired", f"{at}.image", "Required value"))
            for j, port in enumerate(_list(container.get("ports"))):
                if isinstance(port, Mapping):
                    causes += _port(port.get("containerPort"), f"{at}.ports[{j}].containerPort")
    return causes


def _job_restart_policy(spec: Any, where: str) -> list[Cause]:
    """A Job's pods never restart ``Always``; the pod default makes an omitted policy that.

    https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template
    """
    policy = _map(spec).get("restartPolicy")
    if policy in ("OnFailure", "Never"):
        return []
    message = f'Unsupported value: {json.dumps(policy)}: supported values: "OnFailure", "Never"'
    return [_cause("FieldValueNotSupported", f"{where}.restartPolicy", message)]


def _service(spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    ports = [p for p in _list(spec.get("ports")) if isinstance(p, Mapping)]
    names: set[str] = set()
    seen: set[tuple[Any, str]] = set()
    for i, port in enumerate(ports):
        at = f"spec.ports[{i}]"
        causes += _port(port.get("port"), f"{at}.port")
        name = str(port.get("name") or "")
        if len(ports) > 1 and not name:
            causes.append(_cause("FieldValueRequired", f"{at}.name", "Required value"))
        elif name and name in names:
            causes.append(_cause("FieldValueDuplicate", f"{at}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        key = (json.dumps(port.get("port")), str(port.get("protocol") or "TCP"))
        if key in seen:
            shown = f'{{"port":{key[0]},"protocol":"{key[1]}"}}'
            causes.append(_cause("FieldValueDuplicate", at, f"Duplicate value: {shown}"))
        seen.add(key)
        target = port.get("targetPort")
        if isinstance(target, int) and not isinstance(target, bool):
            causes += _port(target, f"{at}.targetPort")
    return causes


def _secret(obj: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in _map(obj.get("data")).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            causes.append(_invalid(f"data[{key}]", "<value omitted>", "illegal base64 data"))
    return causes


def _selector(spec: Mapping[str, Any]) -> list[Cause]:
    selector = spec.get("selector")
    template = spec.get("template")
    if not isinstance(selector, Mapping) or not isinstance(template, Mapping):
        return []
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [_invalid("spec.selector", dict(selector), "empty selector is invalid")]
    try:
        matches = parse_label_selector(selector_to_string(selector))(
            {"metadata": {"labels": labels}}
        )
    except ApiError:
        return [_invalid("spec.selector", dict(selector), "invalid label selector")]
    if matches:
        return []
    return [
        _invalid(
            "spec.template.metadata.labels",
            dict(labels),
            "`selector` does not match template `labels`",
        )
    ]


def _lease(spec: Mapping[str, Any]) -> list[Cause]:
    causes = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        field = "spec.leaseDurationSeconds"
        causes.append(_invalid(field, duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        field = "spec.leaseTransitions"
        causes.append(_invalid(field, transitions, "must be greater than or equal to 0"))
    return causes


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], *path: str) -> bool:
    def get(obj: Any) -> Any:
        for key in path:
            obj = obj.get(key) if isinstance(obj, Mapping) else None
        return obj

    return bool(get(old) != get(new))


def _immutable(kind: Kind, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    frozen = "field is immutable"
    if kind.kind in _SELECTED and _changed(old, new, "spec", "selector"):
        causes.append(_invalid("spec.selector", _map(new.get("spec")).get("selector"), frozen))
    if kind.kind == "Job" and _changed(old, new, "spec", "template"):
        causes.append(_invalid("spec.template", "<object>", frozen))
    if kind.kind == "Service":
        before = _map(old.get("spec")).get("clusterIP")
        after = _map(new.get("spec")).get("clusterIP")
        # a change to ExternalName releases the IP (the storage layer drops it)
        if before and after != before and _map(new.get("spec")).get("type") != "ExternalName":
            causes.append(_invalid("spec.clusterIP", after, frozen))
    if kind.kind in ("ConfigMap", "Secret") and old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(_invalid("immutable", new.get("immutable"), frozen))
        for field in ("data", "binaryData"):
            if _changed(old, new, field):
                message = "field is immutable when `immutable` is set"
                causes.append(_cause("FieldValueForbidden", field, f"Forbidden: {message}"))
    return causes


def _finalizers(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """No new finalizers on an object being deleted (any kind, custom resources too)."""
    before = _map(old.get("metadata"))
    if not before.get("deletionTimestamp"):
        return []
    had = set(_list(before.get("finalizers")))
    added = [f for f in _list(_map(new.get("metadata")).get("finalizers")) if f not in had]
    if not added:
        return []
    message = (
        "Forbidden: no new finalizers can be added if the object is being deleted, "
        f"found new finalizers {json.dumps(added)}"
    )
    return [_cause("FieldValueForbidden", "metadata.finalizers", message)]


def check_rules(kind: Kind, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    """Raise one 422 listing every rule ``obj`` breaks (``old``: the stored object)."""
    causes = _labels(_map(obj.get("metadata")).get("labels"), "metadata.labels")
    raw_spec = obj.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    if kind.group in ("", "apps", "batch"):
        if kind.kind == "Pod":
            causes += _pod_spec(spec, "spec")
        if kind.kind in _WITH_PODS:
            template = _map(spec.get("template"))
            if kind.kind == "CronJob":
                template = _map(_map(_map(spec.get("jobTemplate")).get("spec")).get("template"))
            where = "spec.jobTemplate.spec.template" if kind.kind == "CronJob" else "spec.template"
            labels = _map(template.get("metadata")).get("labels")
            causes += _labels(labels, f"{where}.metadata.labels")
            causes += _pod_spec(template.get("spec"), f"{where}.spec")
            if kind.kind in ("Job", "CronJob"):
                causes += _job_restart_policy(template.get("spec"), f"{where}.spec")
        if kind.kind in _SELECTED:
            causes += _selector(spec)
        if kind.kind == "Service" and kind.group == "":
            causes += _service(spec)
        if kind.kind == "Secret" and kind.group == "":
            causes += _secret(obj)
        if old is not None:
            causes += _immutable(kind, old, obj)
    if kind.group == "coordination.k8s.io" and kind.kind == "Lease":
        causes += _lease(spec)
    if old is not None:
        causes += _finalizers(old, obj)
    if causes:
        name = str(obj.get("metadata", {}).get("name", ""))
        qualified = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
        listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        text = listed if len(causes) == 1 else f"[{listed}]"
        raise ApiError(
            422,
            f'{qualified} "{name}" is invalid: {text}',
            name=name,
            group=kind.group,
            kind=kind.kind,
            causes=causes,
        )
