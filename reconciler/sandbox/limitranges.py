"""The LimitRanger admission plugin: a namespace's LimitRanges default and bound pods.

As https://kubernetes.io/docs/concepts/policy/limit-range/ describes, a LimitRange
item of ``type: Container`` gives every new container that lacks them its
``default`` limits and ``defaultRequest`` requests (the plugin notes what it set in
the pod's ``kubernetes.io/limit-ranger`` annotation), then refuses, with 403
Forbidden, a container (``Container``) or a pod's total (``Pod``) below ``min``,
above ``max`` or beyond ``maxLimitRequestRatio``; a ``PersistentVolumeClaim`` item
bounds a claim's storage request. The messages are the plugin's
(``plugin/pkg/admission/limitranger``): ``minimum cpu usage per Container is 100m,
but request is 50m``. The LimitRange object's own defaulting (``default`` from
``max``, ``defaultRequest`` from ``default`` or ``min``) is in ``defaults.py``.
``admission.py`` installs :class:`LimitRanger`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from reconciler.sandbox.fielderrors import as_list, as_map
from reconciler.sandbox.kinds import CLAIMS, LIMIT_RANGES, PODS, Kind
from reconciler.sandbox.priorities import forbidden
from reconciler.sandbox.quantity import add, parse
from reconciler.sandbox.store import Store

ANNOTATION = "kubernetes.io/limit-ranger"
Obj = dict[str, Any]


def amount(value: Any) -> Decimal:
    """A stored quantity's number (stored quantities are canonical, so they parse)."""
    try:
        return parse(value)[0]
    except ValueError:
        return Decimal(0)


def _containers(spec: Mapping[str, Any]) -> Iterable[tuple[str, Obj]]:
    for group, word in (("initContainers", "init container"), ("containers", "container")):
        for container in as_list(spec.get(group)):
            if isinstance(container, dict):
                yield word, container


def _fill(container: Obj, key: str, defaults: Mapping[str, Any]) -> list[str]:
    """Set each of ``defaults`` the container's ``resources.<key>`` lacks; the names set."""
    if not defaults:
        return []
    resources = container.setdefault("resources", {})
    values = resources.setdefault(key, {})
    added = sorted(name for name in defaults if name not in values)
    for name in added:
        values[name] = defaults[name]
    return added


def _requirements(parent: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The requests and limits of a container's (or a claim's) ``resources``."""
    resources = as_map(parent.get("resources"))
    return as_map(resources.get("requests")), as_map(resources.get("limits"))


def _bound(
    limit_type: str,
    item: Mapping[str, Any],
    requests: Mapping[str, Any],
    limits: Mapping[str, Any],
) -> list[str]:
    """``minConstraint``, ``maxConstraint`` and ``limitRequestRatioConstraint``."""
    errors: list[str] = []
    for name, enforced in sorted(as_map(item.get("min")).items()):
        request, limit = requests.get(name), limits.get(name)
        floor = f"minimum {name} usage per {limit_type} is {enforced}"
        if request is None:
            errors.append(f"{floor}.  No request is specified")
        elif amount(request) < amount(enforced):
            errors.append(f"{floor}, but request is {request}")
        elif limit is not None and amount(limit) < amount(enforced):
            errors.append(f"{floor}, but limit is {limit}")
    for name, enforced in sorted(as_map(item.get("max")).items()):
        request, limit = requests.get(name), limits.get(name)
        ceiling = f"maximum {name} usage per {limit_type} is {enforced}"
        if limit is None:
            errors.append(f"{ceiling}.  No limit is specified")
        elif amount(limit) > amount(enforced):
            errors.append(f"{ceiling}, but limit is {limit}")
        elif request is not None and amount(request) > amount(enforced):
            errors.append(f"{ceiling}, but request is {request}")
    for name, enforced in sorted(as_map(item.get("maxLimitRequestRatio")).items()):
        request, limit = requests.get(name), limits.get(name)
        ratio_of = f"{name} max limit to request ratio per {limit_type} is {enforced}"
        if request is None or limit is None or amount(request) == 0:
            errors.append(f"{ratio_of}, but no request is specified or request is 0.")
            continue
        ratio = amount(limit) / amount(request)
        if ratio > amount(enforced):
            errors.append(f"{ratio_of}, but provided ratio is {ratio:f}")
    return errors


def pod_totals(spec: Mapping[str, Any], key: str) -> dict[str, str]:
    """A pod's ``key`` (requests or limits) per resource: its containers' sum, or an init
    container's value when larger (init containers run one at a time, before them)."""
    totals: dict[str, str] = {}
    for container in as_list(spec.get("containers")):
        for name, value in as_map(as_map(as_map(container).get("resources")).get(key)).items():
            totals[name] = add(totals.get(name), value)
    for container in as_list(spec.get("initContainers")):
        for name, value in as_map(as_map(as_map(container).get("resources")).get(key)).items():
            if name not in totals or amount(value) > amount(totals[name]):
                totals[name] = add(None, value)
    return totals


class LimitRanger:
    """Defaults a new pod's containers, then holds pods and claims to their bounds."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _items(self, namespace: str, limit_type: str) -> list[Mapping[str, Any]]:
        return [
            as_map(item)
            for lr in self.store.view(LIMIT_RANGES, namespace)
            for item in as_list(as_map(lr.get("spec")).get("limits"))
            if as_map(item).get("type") == limit_type
        ]

    def mutate(self, kind: Kind, obj: Obj) -> None:
        if kind.resource != PODS or not isinstance(obj.get("spec"), dict):
            return
        items = self._items(obj["metadata"].get("namespace", ""), "Container")
        if not items:
            return
        notes: list[str] = []
        for word, container in _containers(obj["spec"]):
            for item in items:
                name = container.get("name")
                added = _fill(container, "requests", as_map(item.get("defaultRequest")))
                if added:
                    notes.append(f"{', '.join(added)} request for {word} {name}")
                added = _fill(container, "limits", as_map(item.get("default")))
                if added:
                    notes.append(f"{', '.join(added)} limit for {word} {name}")
        if notes:
            annotations = obj["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)

    def validate(self, kind: Kind, obj: Obj) -> None:
        namespace = obj["metadata"].get("namespace", "")
        errors: list[str] = []
        if kind.resource == PODS:
            spec = as_map(obj.get("spec"))
            for item in self._items(namespace, "Container"):
                for _word, container in _containers(spec):
                    errors += _bound("Container", item, *_requirements(container))
            for item in self._items(namespace, "Pod"):
                requests, limits = pod_totals(spec, "requests"), pod_totals(spec, "limits")
                errors += _bound("Pod", item, requests, limits)
        elif kind.resource == CLAIMS:
            requirements = _requirements(as_map(obj.get("spec")))
            for item in self._items(namespace, "PersistentVolumeClaim"):
                errors += _bound("PersistentVolumeClaim", item, *requirements)
        if errors:
            raise forbidden(kind, obj, errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
