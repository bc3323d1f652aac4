"""Validation of pod specs, workload templates and CronJob schedules, as the API server
words it (kubernetes/kubernetes ``pkg/apis/core/validation`` ``ValidatePodSpec`` and
``pkg/apis/apps/validation``, ``pkg/apis/batch/validation``, Kubernetes 1.30).

What is checked, each with the page it imitates:

* containers: at least one, names unique (init containers too) and RFC 1123 labels,
  an image (https://kubernetes.io/docs/concepts/workloads/pods/#pod-templates,
  https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Container);
* environment variable names as ``IsEnvVarName`` checks them (the relaxed rule is an
  alpha feature, off, in 1.30): https://kubernetes.io/docs/tasks/inject-data-application/define-environment-variable-container/;
* every ``volumeMounts[].name`` names a volume of the pod (or, in a StatefulSet, one
  of its ``volumeClaimTemplates``), volume names unique:
  https://kubernetes.io/docs/concepts/storage/volumes/;
* a Deployment's, ReplicaSet's, StatefulSet's or DaemonSet's pods restart ``Always``
  and carry no ``activeDeadlineSeconds``:
  https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#pod-template;
* a Deployment's strategy: ``rollingUpdate`` only with ``RollingUpdate``, never
  ``maxSurge`` and ``maxUnavailable`` both 0, ``maxUnavailable`` at most 100%:
  https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#strategy;
* a CronJob's schedule parses as cron, holds no ``TZ=``, its name fits 52 characters:
  https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#schedule-syntax.

``rules.py`` calls these from :func:`~reconciler.sandbox.rules.check_rules`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reconciler.sandbox.cron import CronError, parse
from reconciler.sandbox.fielderrors import (
    Cause,
    as_list,
    as_map,
    dot_dir_errors,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    port_number,
    regex_error,
    required,
)

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_PERCENT = re.compile(r"^[0-9]+%$")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_CONCURRENCY = ("Allow", "Forbid", "Replace")
# the workload kinds whose pods must restart Always, and the word their message uses
_ALWAYS = {
    "Deployment": "ReplicaSet",
    "ReplicaSet": "ReplicaSet",
    "StatefulSet": "StatefulSet",
    "DaemonSet": "DaemonSet",
    "ReplicationController": "ReplicationController",
}


def dns_label_errors(value: str) -> list[str]:
    """``IsDNS1123Label``: why ``value`` is not an RFC 1123 label (container, volume names)."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL.match(value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                "characters or '-', and must start and end with an alphanumeric character",
                "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
                "my-name",
                "123-abc",
            )
        )
    return errors


def _name(value: Any, field: str) -> list[Cause]:
    name = value if isinstance(value, str) else ""
    if not name:
        return [required(field)]
    return [invalid(field, name, why) for why in dns_label_errors(name)]


def _env(env: Any, where: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, var in enumerate(as_list(env)):
        name = str(as_map(var).get("name") or "")
        field = f"{where}[{i}].name"
        if not name:
            causes.append(required(field))
        if not _ENV_NAME.match(name):
            message = regex_error(
                "a valid environment variable name must consist of alphabetic characters, "
                "digits, '_', '-', or '.', and must not start with a digit",
                "[-._a-zA-Z][-._a-zA-Z0-9]*",
                "my.env-name",
                "MY_ENV.NAME",
                "MyEnvName1",
            )
            causes.append(invalid(field, name, message))
        causes += [invalid(field, name, why) for why in dot_dir_errors(name)]
    return causes


def _mounts(mounts: Any, volumes: set[str], where: str) -> list[Cause]:
    causes: list[Cause] = []
    paths: set[str] = set()
    for i, mount in enumerate(as_list(mounts)):
        mount = as_map(mount)
        at = f"{where}[{i}]"
        name = str(mount.get("name") or "")
        if not name:
            causes.append(required(f"{at}.name"))
        if name not in volumes:
            causes.append(not_found(f"{at}.name", name))
        path = str(mount.get("mountPath") or "")
        if not path:
            causes.append(required(f"{at}.mountPath"))
        if path in paths:
            causes.append(invalid(f"{at}.mountPath", path, "must be unique"))
        paths.add(path)
    return causes


def _container(container: Mapping[str, Any], volumes: set[str], at: str) -> list[Cause]:
    """``validateContainerCommon``, in its order: name, image, ports, env, mounts."""
    causes = _name(container.get("name"), f"{at}.name")
    if not container.get("image"):
        causes.append(required(f"{at}.image"))
    for j, port in enumerate(as_list(container.get("ports"))):
        if isinstance(port, Mapping):
            causes += port_number(port.get("containerPort"), f"{at}.ports[{j}].containerPort")
    causes += _env(container.get("env"), f"{at}.env")
    causes += _mounts(container.get("volumeMounts"), volumes, f"{at}.volumeMounts")
    return causes


def _volumes(volumes: Any, where: str) -> tuple[set[str], list[Cause]]:
    names: set[str] = set()
    causes: list[Cause] = []
    for i, volume in enumerate(as_list(volumes)):
        name = as_map(volume).get("name")
        field = f"{where}[{i}].name"
        causes += _name(name, field)
        if isinstance(name, str) and name in names:
            causes.append(duplicate(field, name))
        elif isinstance(name, str) and name:
            names.add(name)
    return names, causes


def pod_spec(spec: Any, where: str, claims: frozenset[str] = frozenset()) -> list[Cause]:
    """``ValidatePodSpec``'s checks of volumes, containers, init containers and restarts.

    ``claims``: a StatefulSet's ``volumeClaimTemplates`` names, which its containers
    mount as if they were volumes of the template.
    """
    if not isinstance(spec, Mapping):
        return []
    volumes, causes = _volumes(spec.get("volumes"), f"{where}.volumes")
    volumes |= claims
    containers = [as_map(c) for c in as_list(spec.get("containers"))]
    if not containers:
        causes.append(required(f"{where}.containers"))
    names: set[Any] = set()
    for i, container in enumerate(containers):
        at = f"{where}.containers[{i}]"
        causes += _container(container, volumes, at)
        if container.get("name") in names:
            causes.append(duplicate(f"{at}.name", container.get("name")))
        names.add(container.get("name"))
    for i, container in enumerate(as_map(c) for c in as_list(spec.get("initContainers"))):
        at = f"{where}.initContainers[{i}]"
        causes += _container(container, volumes, at)
        if container.get("name") in names:
            causes.append(duplicate(f"{at}.name", container.get("name")))
        elif container.get("name"):
            names.add(container.get("name"))
    policy = spec.get("restartPolicy")
    if not policy:
        causes.append(required(f"{where}.restartPolicy"))
    elif policy not in _RESTART_POLICIES:
        causes.append(not_supported(f"{where}.restartPolicy", policy, _RESTART_POLICIES))
    return causes


def always_restarting(kind: str, spec: Any, where: str) -> list[Cause]:
    """A controller that keeps pods running refuses pods that stop or have a deadline."""
    word = _ALWAYS.get(kind)
    spec = as_map(spec)
    if word is None or not spec:
        return []
    causes: list[Cause] = []
    policy = spec.get("restartPolicy")
    if policy and policy != "Always":
        causes.append(not_supported(f"{where}.restartPolicy", policy, ("Always",)))
    if spec.get("activeDeadlineSeconds") is not None:
        why = f"activeDeadlineSeconds in {word} is not Supported"
        causes.append(forbidden(f"{where}.activeDeadlineSeconds", why))
    return causes


def _int_or_percent(value: Any, field: str) -> tuple[int | None, list[Cause]]:
    """``ValidatePositiveIntOrPercent`` and the value ``getIntOrPercentValue`` reads."""
    if isinstance(value, bool) or value is None:
        return None, []
    if isinstance(value, int):
        if value < 0:
            return value, [invalid(field, value, "must be greater than or equal to 0")]
        return value, []
    if isinstance(value, str) and _PERCENT.match(value):
        return int(value[:-1]), []
    message = regex_error(
        "a valid percent string must be a numeric string followed by an ending '%'",
        "[0-9]+%",
        "1%",
        "93%",
    )
    return None, [invalid(field, value, message)]


def deployment_strategy(spec: Mapping[str, Any]) -> list[Cause]:
    """``ValidateDeploymentStrategy`` and ``ValidateRollingUpdateDeployment``."""
    strategy = as_map(spec.get("strategy"))
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    where = "spec.strategy.rollingUpdate"
    if kind == "Recreate":
        if rolling is not None:
            why = "may not be specified when strategy `type` is 'Recreate'"
            return [forbidden(where, why)]
        return []
    if kind != "RollingUpdate":
        return [not_supported("spec.strategy.type", kind, ("Recreate", "RollingUpdate"))]
    rolling = as_map(rolling)
    unavailable, causes = _int_or_percent(rolling.get("maxUnavailable"), f"{where}.maxUnavailable")
    surge, more = _int_or_percent(rolling.get("maxSurge"), f"{where}.maxSurge")
    causes += more
    field, shown = f"{where}.maxUnavailable", rolling.get("maxUnavailable")
    if unavailable == 0 and surge == 0:
        causes.append(invalid(field, shown, "may not be 0 when `maxSurge` is 0"))
    if isinstance(shown, str) and unavailable is not None and unavailable > 100:
        causes.append(invalid(field, shown, "must not be greater than 100%"))
    return causes


def _time_zone(spec: Mapping[str, Any]) -> list[Cause]:
    """``validateTimeZone``: an IANA zone name, never ``Local``."""
    zone = spec.get("timeZone")
    if zone is None:
        return []
    if not zone:
        return [invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string")]
    if str(zone).lower() == "local":
        why = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        return [invalid("spec.timeZone", zone, why)]
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        return [invalid("spec.timeZone", zone, f"unknown time zone {zone}")]
    return []


def cronjob(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> list[Cause]:
    """``ValidateCronJobCreate``/``ValidateCronJobSpec``: name length, schedule, policy."""
    causes: list[Cause] = []
    name = str(as_map(obj.get("metadata")).get("name") or "")
    if len(name) > 52:
        # the Jobs it creates append an 11-character suffix to a 63-character label
        causes.append(invalid("metadata.name", name, "must be no more than 52 characters"))
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(required("spec.schedule"))
    else:
        text = str(schedule)
        try:
            parse(text)
        except CronError as e:
            causes.append(invalid("spec.schedule", text, str(e)))
        if "TZ" in text:
            why = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            causes.append(invalid("spec.schedule", text, why))
    causes += _time_zone(spec)
    policy = spec.get("concurrencyPolicy")
    if not policy:
        causes.append(required("spec.concurrencyPolicy"))
    elif policy not in _CONCURRENCY:
        causes.append(not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY))
    return causes
