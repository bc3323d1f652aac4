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
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from reconciler.sandbox import workloadrules
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.fielderrors import (
    Cause,
    as_list,
    as_map,
    cause,
    dot_dir_errors,
    invalid,
    port_number,
    regex_error,
    required,
)
from reconciler.sandbox.kinds import PRIORITY_CLASSES, Kind
from reconciler.sandbox.priorities import priority_class_causes
from reconciler.sandbox.selectors import parse_label_selector, selector_to_string

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_SELECTED = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"})
_WITH_PODS = frozenset({*_SELECTED, "Job", "CronJob", "ReplicationController"})
# keys a typed Secret must hold (``ValidateSecret``); basic-auth needs either of its two
_SECRET_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}


def label_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (``[prefix/]name``), empty when it is."""
    return list(_label_key_errors(key))


@functools.lru_cache(maxsize=4096)
def _label_key_errors(key: str) -> tuple[str, ...]:
    """``label_key_errors``, remembered: every write checks every label, and the same
    few keys (``app``, ``pod-template-hash``) come again and again."""
    prefix, _, name = key.rpartition("/")
    errors = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        errors.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name or len(name) > 63 or not _NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "must start and end with an alphanumeric character and be at most 63 long"
        )
    return tuple(errors)


@functools.lru_cache(maxsize=4096)
def _bad_label_value(value: str) -> bool:
    return bool(value) and (len(value) > 63 or not _NAME.match(value))


def _labels(labels: Any, where: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(labels, Mapping):
        return causes
    for key, value in labels.items():
        for why in _label_key_errors(str(key)):
            causes.append(invalid(f"{where}", key, why))
        if isinstance(value, str) and _bad_label_value(value):
            causes.append(
                invalid(
                    f"{where}",
                    value,
                    "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', start and end with an alphanumeric "
                    "character and be at most 63 characters",
                )
            )
    return causes


def _job_restart_policy(spec: Any, where: str) -> list[Cause]:
    """A Job's pods never restart ``Always``; the pod default makes an omitted policy that.

    https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template
    """
    policy = as_map(spec).get("restartPolicy")
    if policy in ("OnFailure", "Never"):
        return []
    message = f'Unsupported value: {json.dumps(policy)}: supported values: "OnFailure", "Never"'
    return [cause("FieldValueNotSupported", f"{where}.restartPolicy", message)]


def _service(spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    ports = [p for p in as_list(spec.get("ports")) if isinstance(p, Mapping)]
    # ValidateService: only a headless or an ExternalName Service may have no ports
    # (https://kubernetes.io/docs/concepts/services-networking/service/#headless-services)
    portless = spec.get("clusterIP") == "None" or spec.get("type") == "ExternalName"
    if not as_list(spec.get("ports")) and not portless:
        causes.append(required("spec.ports"))
    names: set[str] = set()
    seen: set[tuple[Any, str]] = set()
    for i, port in enumerate(ports):
        at = f"spec.ports[{i}]"
        causes += port_number(port.get("port"), f"{at}.port")
        name = str(port.get("name") or "")
        if len(ports) > 1 and not name:
            causes.append(cause("FieldValueRequired", f"{at}.name", "Required value"))
        elif name and name in names:
            causes.append(cause("FieldValueDuplicate", f"{at}.name", f'Duplicate value: "{name}"'))
        names.add(name)
        key = (json.dumps(port.get("port")), str(port.get("protocol") or "TCP"))
        if key in seen:
            shown = f'{{"port":{key[0]},"protocol":"{key[1]}"}}'
            causes.append(cause("FieldValueDuplicate", at, f"Duplicate value: {shown}"))
        seen.add(key)
        target = port.get("targetPort")
        if isinstance(target, int) and not isinstance(target, bool):
            causes += port_number(target, f"{at}.targetPort")
    return causes


def config_key_errors(key: str) -> list[str]:
    """``IsConfigMapKey``: why ``key`` cannot name a file of a ConfigMap or Secret volume."""
    errors = ["must be no more than 253 characters"] if len(key) > 253 else []
    if not _CONFIG_KEY.match(key):
        errors.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                "[-._a-zA-Z0-9]+",
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    return errors + dot_dir_errors(key)


def _keys(values: Any, where: str) -> list[Cause]:
    return [
        invalid(f"{where}[{key}]", key, why)
        for key in as_map(values)
        for why in config_key_errors(str(key))
    ]


# core.MaxSecretSize: what a ConfigMap's values, or a Secret's, may hold in all
# (https://kubernetes.io/docs/concepts/configuration/configmap/#motivation: "The data
# stored in a ConfigMap cannot exceed 1 MiB"; for a Secret, "the total bytes of the
# values in the Data field must be less than MaxSecretSize bytes":
# https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/)
MAX_DATA_SIZE = 1024 * 1024


def _decoded_size(value: Any) -> int:
    """The bytes a base64 value stands for (binaryData, a Secret's data); an
    undecodable one counts as its text (its own cause says it is not base64)."""
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value).encode())


def _too_large(size: int, where: str) -> list[Cause]:
    if size <= MAX_DATA_SIZE:
        return []
    why = f"Too long: must have at most {MAX_DATA_SIZE} bytes"
    return [cause("FieldValueTooLong", where, why)]


def _configmap(obj: Mapping[str, Any]) -> list[Cause]:
    """``ValidateConfigMap``: keys, no key in both ``data`` and ``binaryData``, and
    the values of both at most 1 MiB together (the keys do not count). The error
    names the whole object, as a real API server's does: ``ConfigMap "big" is
    invalid: []: Too long: must have at most 1048576 bytes``."""
    causes = _keys(obj.get("data"), "data")
    binary = as_map(obj.get("binaryData"))
    for key in as_map(obj.get("data")):
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    size = sum(len(str(v).encode()) for v in as_map(obj.get("data")).values())
    size += sum(_decoded_size(v) for v in binary.values())
    return causes + _keys(binary, "binaryData") + _too_large(size, "[]")


def _secret(obj: Mapping[str, Any]) -> list[Cause]:
    """``ValidateSecret``: keys, base64 values, and the keys its ``type`` requires
    (https://kubernetes.io/docs/concepts/configuration/secret/#secret-types)."""
    data = as_map(obj.get("data"))
    causes = _keys(data, "data")
    for key, value in data.items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            causes.append(invalid(f"data[{key}]", "<value omitted>", "illegal base64 data"))
    kind = obj.get("type")
    if kind == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        causes += [required("data[username]"), required("data[password]")]
    needed = _SECRET_KEYS.get(str(kind), ())
    causes += [required(f"data[{key}]") for key in needed if key not in data]
    return causes + _too_large(sum(_decoded_size(v) for v in data.values()), "data")


def _selector(spec: Mapping[str, Any]) -> list[Cause]:
    """The apps/v1 workloads' selector: required, not empty, matching the template's labels.

    ``ValidateDeploymentSpec`` (and the ReplicaSet, StatefulSet and DaemonSet twins) in
    kubernetes/kubernetes ``pkg/apis/apps/validation``: a missing selector is ``Required``,
    and, as no labels match a missing selector, the template's labels are also reported
    as not matching it. A missing template is the empty template the Go value type
    decodes to, so its labels are missing too.
    https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#selector
    """
    selector = spec.get("selector")
    template = spec.get("template")
    if selector is not None and not isinstance(selector, Mapping):
        return []  # a shape error: the decoder's 400, not a rule's
    labels = as_map(as_map(as_map(template).get("metadata")).get("labels"))
    mismatch = invalid(
        "spec.template.metadata.labels", dict(labels), "`selector` does not match template `labels`"
    )
    if selector is None:
        return [required("spec.selector"), mismatch]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [invalid("spec.selector", dict(selector), "empty selector is invalid")]
    try:
        matches = parse_label_selector(selector_to_string(selector))(
            {"metadata": {"labels": labels}}
        )
    except ApiError:
        return [invalid("spec.selector", dict(selector), "invalid label selector")]
    return [] if matches else [mismatch]


def _rc_selector(spec: Mapping[str, Any]) -> list[Cause]:
    """``ValidateReplicationControllerSpec``: a plain selector, matching the template."""
    selector = as_map(spec.get("selector"))
    if not selector:
        return [cause("FieldValueRequired", "spec.selector", "Required value")]
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [cause("FieldValueRequired", "spec.template", "Required value")]
    labels = as_map(as_map(template.get("metadata")).get("labels"))
    if all(labels.get(k) == v for k, v in selector.items()):
        return []
    field = "spec.template.metadata.labels"
    return [invalid(field, dict(labels), "selector does not match template labels")]


def _lease(spec: Mapping[str, Any]) -> list[Cause]:
    causes = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        field = "spec.leaseDurationSeconds"
        causes.append(invalid(field, duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        field = "spec.leaseTransitions"
        causes.append(invalid(field, transitions, "must be greater than or equal to 0"))
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
    if kind.kind in (*_SELECTED, "Job") and _changed(old, new, "spec", "selector"):
        causes.append(invalid("spec.selector", as_map(new.get("spec")).get("selector"), frozen))
    if kind.kind == "Job" and _changed(old, new, "spec", "template"):
        causes.append(invalid("spec.template", "<object>", frozen))
    if kind.kind == "Service":
        before = as_map(old.get("spec")).get("clusterIP")
        after = as_map(new.get("spec")).get("clusterIP")
        # a change to ExternalName releases the IP (the storage layer drops it)
        if before and after != before and as_map(new.get("spec")).get("type") != "ExternalName":
            causes.append(invalid("spec.clusterIP", after, frozen))
    if kind.kind == "Secret" and _changed(old, new, "type"):
        causes.append(invalid("type", new.get("type"), frozen))
    if kind.kind in ("ConfigMap", "Secret") and old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(invalid("immutable", new.get("immutable"), frozen))
        for field in ("data", "binaryData"):
            if _changed(old, new, field):
                message = "field is immutable when `immutable` is set"
                causes.append(cause("FieldValueForbidden", field, f"Forbidden: {message}"))
    return causes


def _finalizers(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """No new finalizers on an object being deleted (any kind, custom resources too)."""
    before = as_map(old.get("metadata"))
    if not before.get("deletionTimestamp"):
        return []
    had = set(as_list(before.get("finalizers")))
    added = [f for f in as_list(as_map(new.get("metadata")).get("finalizers")) if f not in had]
    if not added:
        return []
    message = (
        "Forbidden: no new finalizers can be added if the object is being deleted, "
        f"found new finalizers {json.dumps(added)}"
    )
    return [cause("FieldValueForbidden", "metadata.finalizers", message)]


# apimachinery's TotalAnnotationSizeLimitB: keys and values together
ANNOTATIONS_LIMIT = 256 * 1024


def _annotations(annotations: Any, where: str) -> list[Cause]:
    """Keys are qualified names; all of them with their values fit in 256 KiB
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set)."""
    causes: list[Cause] = []
    if not isinstance(annotations, Mapping):
        return causes
    for key in annotations:
        causes += [invalid(where, key, why) for why in label_key_errors(str(key).lower())]
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        why = f"Too long: must have at most {ANNOTATIONS_LIMIT} bytes"
        causes.append(cause("FieldValueTooLong", where, why))
    return causes


def check_rules(kind: Kind, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
    """Raise one 422 listing every rule ``obj`` breaks (``old``: the stored object)."""
    meta = as_map(obj.get("metadata"))
    causes = _labels(meta.get("labels"), "metadata.labels")
    causes += _annotations(meta.get("annotations"), "metadata.annotations")
    raw_spec = obj.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    if kind.group in ("", "apps", "batch"):
        if kind.kind == "Pod":
            causes += workloadrules.pod_spec(spec, "spec")
        if kind.kind == "CronJob":
            causes += workloadrules.cronjob(obj, spec)
        if kind.kind in _SELECTED:  # first, as ValidateDeploymentSpec and its twins do
            causes += _selector(spec)
        if kind.kind in _WITH_PODS:
            template = as_map(spec.get("template"))
            if kind.kind == "CronJob":
                job = as_map(as_map(spec.get("jobTemplate")).get("spec"))
                template = as_map(job.get("template"))
            where = "spec.jobTemplate.spec.template" if kind.kind == "CronJob" else "spec.template"
            labels = as_map(template.get("metadata")).get("labels")
            causes += _labels(labels, f"{where}.metadata.labels")
            claims = frozenset(
                str(as_map(as_map(t).get("metadata")).get("name"))
                for t in as_list(spec.get("volumeClaimTemplates"))
            )
            pod = template.get("spec")
            if pod is None and kind.kind != "ReplicationController":
                # the template is a Go value, not a pointer (the RC's is): an absent one
                # decodes empty and is defaulted as any pod spec, so it is validated too
                pod = {"restartPolicy": "Always"}
            causes += workloadrules.pod_spec(pod, f"{where}.spec", claims)
            causes += workloadrules.always_restarting(kind.kind, pod, f"{where}.spec")
            if kind.kind in ("Job", "CronJob"):
                causes += _job_restart_policy(pod, f"{where}.spec")
        if kind.kind == "ReplicationController":
            causes += _rc_selector(spec)
        if kind.kind == "Deployment":
            causes += workloadrules.deployment_strategy(spec)
        if kind.kind == "ConfigMap" and kind.group == "":
            causes += _configmap(obj)
        if kind.kind == "Service" and kind.group == "":
            causes += _service(spec)
        if kind.kind == "Secret" and kind.group == "":
            causes += _secret(obj)
        if old is not None:
            causes += _immutable(kind, old, obj)
    if kind.group == "coordination.k8s.io" and kind.kind == "Lease":
        causes += _lease(spec)
    if kind.resource == PRIORITY_CLASSES:
        causes += priority_class_causes(obj, old)
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
