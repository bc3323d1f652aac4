"""Defaulting and normalisation: the object as a real API server stores it.

A kube-apiserver decodes every body into its Go types, which runs the ``SetDefaults_*``
functions and the version conversion; what a client reads back therefore carries
fields it never sent. This module does the same, in place, for the built-in kinds
the sandbox serves (values from the API reference,
https://kubernetes.io/docs/reference/kubernetes-api/):

* pod specs (Pods and every pod template): ``restartPolicy: Always``, ``dnsPolicy:
  ClusterFirst``, ``schedulerName: default-scheduler``, ``securityContext: {}``,
  ``terminationGracePeriodSeconds: 30``; containers get ``imagePullPolicy`` (``Always``
  for ``:latest`` or no tag, else ``IfNotPresent``), ``terminationMessagePath`` and
  ``terminationMessagePolicy``; ports ``protocol: TCP``; probes their thresholds;
  ConfigMap/Secret volumes ``defaultMode: 420``. Pods alone get
  ``enableServiceLinks: true`` and requests copied from limits;
* Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob specs; Services
  (``type``, ports, ``sessionAffinity``, traffic policies); Secrets (``type:
  Opaque``, ``stringData`` folded into base64 ``data`` and not stored, see
  https://kubernetes.io/docs/concepts/configuration/secret/); NetworkPolicy
  ``policyTypes``; RBAC subjects' ``apiGroup``; the Namespace label
  ``kubernetes.io/metadata.name``; CRD ``names`` and ``conversion``;
* every resource quantity in canonical form (``quantity.py``).

Defaulting is idempotent, so a re-apply of the same manifest stores nothing new.
Ownership follows the real server: ``api.py`` defaults a create/update body before
recording what its manager changed (the decoder runs first, so an ``Update`` manager
owns the defaults it caused), but after server-side apply computed the applier's
fields, so an applier never owns a defaulted field.

Which kinds carry ``metadata.generation`` is here too (:func:`tracks_generation`):
only kinds whose strategy sets it (workloads, Ingress, NetworkPolicy, PDB, Pod, CRDs
and custom resources); ConfigMaps, Secrets, ServiceAccounts, Services and
Namespaces have none. Values the storage layer assigns (Service IPs, node ports,
a Job's selector) are in ``allocation.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import Kind
from reconciler.sandbox.quantity import MILLI, NANO, canonical

Obj = dict[str, Any]
_GENERATION = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("apps", "ReplicaSet"),
        ("", "ReplicationController"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("", "Pod"),
        ("networking.k8s.io", "Ingress"),
        ("networking.k8s.io", "NetworkPolicy"),
        ("policy", "PodDisruptionBudget"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    }
)
_CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = (
    ("timeoutSeconds", 1),
    ("periodSeconds", 10),
    ("successThreshold", 1),
    ("failureThreshold", 3),
)
_FILE_MODE = 420  # 0644, the default mode of ConfigMap, Secret and projected volume files
_RBAC = "rbac.authorization.k8s.io"


class _QuantityError(Exception):
    """A value that no resource.Quantity can hold (the body cannot be decoded)."""


def tracks_generation(kind: Kind) -> bool:
    """Whether the server keeps ``metadata.generation`` for ``kind``."""
    return kind.crd or (kind.group, kind.kind) in _GENERATION


def generation_changes(kind: Kind, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a write from ``old`` to ``new`` bumps ``metadata.generation``.

    Everything but metadata and status counts; a Deployment's annotations count too,
    because its controller copies them to the ReplicaSet (the Deployment strategy's
    PrepareForUpdate).
    """
    skipped = ("metadata", "status", "apiVersion", "kind")
    if any(old.get(k) != new.get(k) for k in {*old, *new} if k not in skipped):
        return True
    if kind.kind == "Deployment" and kind.group == "apps":
        return bool(
            _map(old.get("metadata")).get("annotations")
            != _map(new.get("metadata")).get("annotations")
        )
    return False


def apply_defaults(kind: Kind, obj: Obj) -> None:
    """Default and normalise ``obj`` (a body of ``kind``) in place.

    Raises a 400 ``ApiError`` when a quantity cannot be parsed, as a real server
    refuses a body it cannot decode.
    """
    if kind.crd:
        return  # custom resources are defaulted by their CRD's schema, which is not simulated
    handler = _HANDLERS.get((kind.group, kind.kind))
    if handler is None:
        return
    try:
        handler(obj)
    except _QuantityError as e:
        raise ApiError(
            400, f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: {e}'
        ) from e


# --- helpers ---------------------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _child(parent: Any, key: str, create: bool = False) -> Obj | None:
    """``parent[key]`` when it is a map (made empty when ``create`` and absent)."""
    if not isinstance(parent, dict):
        return None
    if key not in parent or parent[key] is None:
        if not create:
            return None
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None


def _items(parent: Any, key: str) -> list[Obj]:
    """The map items of the list ``parent[key]`` (other items are left alone)."""
    value = parent.get(key) if isinstance(parent, dict) else None
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def _unset(obj: Obj, key: str) -> bool:
    """A field the Go types would treat as unset: absent, null, ``""`` or ``0``."""
    value = obj.get(key)
    return value is None or value == "" or (value == 0 and not isinstance(value, bool))


def _default(obj: Obj, key: str, value: Any) -> None:
    if _unset(obj, key):
        obj[key] = value


def _quantity(value: Any, precision: Decimal) -> str:
    try:
        return canonical(value, precision)
    except ValueError as e:
        raise _QuantityError(str(e)) from e


def _resource_list(parent: Any, key: str) -> None:
    """A ResourceList (requests, limits, PVC sizes): canonical, rounded up to ``1m``."""
    values = _child(parent, key)
    if values is not None:
        for name, value in list(values.items()):
            values[name] = _quantity(value, MILLI)


def _resources(parent: Any) -> None:
    resources = _child(parent, "resources")
    for key in ("requests", "limits"):
        _resource_list(resources, key)


# --- pod specs ---------------------------------------------------------------------------


def _pull_policy(image: Any) -> str:
    """``Always`` for an image with the tag ``latest`` or no tag and no digest."""
    name = str(image or "")
    if "@" in name:
        name, _, _digest = name.partition("@")
        tag = name.rpartition(":")[2] if ":" in name.rpartition("/")[2] else ""
        return "Always" if tag == "latest" else "IfNotPresent"
    last = name.rpartition("/")[2]
    tag = last.rpartition(":")[2] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _http_get(handler: Any) -> None:
    action = _child(handler, "httpGet")
    if action is not None:
        _default(action, "path", "/")
        _default(action, "scheme", "HTTP")


def _field_ref(parent: Any) -> None:
    ref = _child(parent, "fieldRef")
    if ref is not None:
        _default(ref, "apiVersion", "v1")


def _container(container: Obj, *, host_network: bool) -> None:
    _default(container, "imagePullPolicy", _pull_policy(container.get("image")))
    _default(container, "terminationMessagePath", "/dev/termination-log")
    _default(container, "terminationMessagePolicy", "File")
    for port in _items(container, "ports"):
        _default(port, "protocol", "TCP")
        if host_network and _unset(port, "hostPort"):
            port["hostPort"] = port.get("containerPort")
    for name in _PROBES:
        probe = _child(container, name)
        if probe is not None:
            for key, value in _PROBE_DEFAULTS:
                _default(probe, key, value)
            _http_get(probe)
    lifecycle = _child(container, "lifecycle")
    for hook in ("postStart", "preStop"):
        _http_get(_child(lifecycle, hook))
    for env in _items(container, "env"):
        source = _child(env, "valueFrom")
        _field_ref(source)
        resource_ref = _child(source, "resourceFieldRef")
        if resource_ref is not None:
            resource_ref["divisor"] = _quantity(resource_ref.get("divisor") or 0, NANO)
    _resources(container)


def _volume(volume: Obj) -> None:
    if not any(k != "name" and v is not None for k, v in volume.items()):
        volume["emptyDir"] = {}
    for source in ("configMap", "secret", "downwardAPI", "projected"):
        found = _child(volume, source)
        if found is not None and found.get("defaultMode") is None:
            found["defaultMode"] = _FILE_MODE
    for item in _items(_child(volume, "downwardAPI"), "items"):
        _field_ref(item)
    for projection in _items(_child(volume, "projected"), "sources"):
        token = _child(projection, "serviceAccountToken")
        if token is not None and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
        for item in _items(_child(projection, "downwardAPI"), "items"):
            _field_ref(item)
    host_path = _child(volume, "hostPath")
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    empty_dir = _child(volume, "emptyDir")
    if empty_dir is not None and empty_dir.get("sizeLimit") is not None:
        empty_dir["sizeLimit"] = _quantity(empty_dir["sizeLimit"], NANO)
    template = _child(_child(volume, "ephemeral"), "volumeClaimTemplate")
    _claim_spec(_child(template, "spec"))


def _pod_spec(spec: Obj | None, *, pod: bool = False) -> None:
    """SetDefaults_PodSpec, plus SetDefaults_Pod's extras when ``pod`` (not templates)."""
    if spec is None:
        return
    _default(spec, "restartPolicy", "Always")
    _default(spec, "dnsPolicy", "ClusterFirst")
    _default(spec, "schedulerName", "default-scheduler")
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    host_network = pod and spec.get("hostNetwork") is True
    for group in _CONTAINER_GROUPS:
        for container in _items(spec, group):
            _container(container, host_network=host_network)
            if pod and group != "ephemeralContainers":
                _requests_from_limits(container)
    for volume in _items(spec, "volumes"):
        _volume(volume)
    _resources(spec)
    _resource_list(spec, "overhead")
    if pod and spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True


def _requests_from_limits(container: Obj) -> None:
    """A Pod's container without a request for a limited resource requests its limit."""
    resources = _child(container, "resources")
    limits = _child(resources, "limits")
    if resources is None or not limits:
        return
    requests = _child(resources, "requests", create=True)
    if requests is not None:
        for name, value in limits.items():
            requests.setdefault(name, value)


def _template(spec: Any) -> None:
    _pod_spec(_child(_child(spec, "template"), "spec"))


def _claim_spec(spec: Obj | None) -> None:
    if spec is not None:
        _default(spec, "volumeMode", "Filesystem")
        _resources(spec)


# --- kinds --------------------------------------------------------------------------------


def _pod(obj: Obj) -> None:
    _pod_spec(_child(obj, "spec"), pod=True)


def _deployment(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default_none(spec, "replicas", 1)
    strategy = _child(spec, "strategy", create=True)
    if strategy is not None:
        _default(strategy, "type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            rolling = _child(strategy, "rollingUpdate", create=True)
            if rolling is not None:
                _default_none(rolling, "maxUnavailable", "25%")
                _default_none(rolling, "maxSurge", "25%")
    _default_none(spec, "revisionHistoryLimit", 10)
    _default_none(spec, "progressDeadlineSeconds", 600)
    _template(spec)


def _statefulset(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default(spec, "podManagementPolicy", "OrderedReady")
    strategy = _child(spec, "updateStrategy", create=True)
    if strategy is not None:
        if _unset(strategy, "type"):
            strategy["type"] = "RollingUpdate"
            _child(strategy, "rollingUpdate", create=True)
        rolling = _child(strategy, "rollingUpdate")
        if strategy.get("type") == "RollingUpdate" and rolling is not None:
            _default_none(rolling, "partition", 0)
    retention = _child(spec, "persistentVolumeClaimRetentionPolicy", create=True)
    if retention is not None:
        _default(retention, "whenDeleted", "Retain")
        _default(retention, "whenScaled", "Retain")
    _default_none(spec, "replicas", 1)
    _default_none(spec, "revisionHistoryLimit", 10)
    for claim in _items(spec, "volumeClaimTemplates"):
        # apps/v1 keeps apiVersion/kind on these (kubernetes/kubernetes#87583)
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        _claim_spec(_child(claim, "spec", create=True))
        status = _child(claim, "status", create=True)
        if status is not None:
            _default(status, "phase", "Pending")
    _template(spec)


def _daemonset(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    strategy = _child(spec, "updateStrategy", create=True)
    if strategy is not None:
        _default(strategy, "type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            rolling = _child(strategy, "rollingUpdate", create=True)
            if rolling is not None:
                _default_none(rolling, "maxUnavailable", 1)
                _default_none(rolling, "maxSurge", 0)
    _default_none(spec, "revisionHistoryLimit", 10)
    _template(spec)


def _replicaset(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default_none(spec, "replicas", 1)
    _template(spec)


def _replication_controller(obj: Obj) -> None:
    """``SetDefaults_ReplicationController``: selector and labels from the template's."""
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    labels = _map(_child(_child(spec, "template"), "metadata")).get("labels")
    if isinstance(labels, Mapping) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _child(obj, "metadata", create=True)
        if meta is not None and not meta.get("labels"):
            meta["labels"] = dict(labels)
    _default_none(spec, "replicas", 1)
    _template(spec)


def _limit_range(obj: Obj) -> None:
    """``SetDefaults_LimitRangeItem``: a Container item's default limit falls back to its
    max, its default request to its default limit, then to its min."""
    for item in _items(_child(obj, "spec"), "limits"):
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            _resource_list(item, key)
        if item.get("type") != "Container":
            continue
        default = _child(item, "default", create=True)
        request = _child(item, "defaultRequest", create=True)
        if default is None or request is None:
            continue
        for source, target in (("max", default), ("default", request), ("min", request)):
            for name, value in _map(item.get(source)).items():
                target.setdefault(name, value)


def _resource_quota(obj: Obj) -> None:
    _resource_list(_child(obj, "spec"), "hard")
    status = _child(obj, "status")
    for key in ("hard", "used"):
        _resource_list(status, key)


def _priority_class(obj: Obj) -> None:
    _default(obj, "preemptionPolicy", "PreemptLowerPriority")


def _job(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    _default_none(spec, "parallelism", 1)
    _default_none(spec, "backoffLimit", 6)
    labels = _map(_child(_child(spec, "template"), "metadata")).get("labels")
    meta = _child(obj, "metadata", create=True)
    if isinstance(labels, Mapping) and meta is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    _default(spec, "completionMode", "NonIndexed")
    _default_none(spec, "suspend", False)
    replacement = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    _default(spec, "podReplacementPolicy", replacement)
    _template(spec)


def _cronjob(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default(spec, "concurrencyPolicy", "Allow")
    _default_none(spec, "suspend", False)
    _default_none(spec, "successfulJobsHistoryLimit", 3)
    _default_none(spec, "failedJobsHistoryLimit", 1)
    _template(_child(_child(spec, "jobTemplate"), "spec"))


def _service(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default(spec, "sessionAffinity", "None")
    if spec.get("sessionAffinity") == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec.get("sessionAffinity") == "ClientIP":
        client_ip = _map(_map(spec.get("sessionAffinityConfig")).get("clientIP"))
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    _default(spec, "type", "ClusterIP")
    kind = spec.get("type")
    for port in _items(spec, "ports"):
        _default(port, "protocol", "TCP")
        if _unset(port, "targetPort"):
            port["targetPort"] = port.get("port")
    if externally_accessible(spec):
        _default(spec, "externalTrafficPolicy", "Cluster")
    if kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        _default_none(spec, "internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        _default_none(spec, "allocateLoadBalancerNodePorts", True)


def externally_accessible(spec: Mapping[str, Any]) -> bool:
    """NodePort and LoadBalancer Services, and ClusterIP ones with external IPs."""
    kind = spec.get("type")
    return kind in ("NodePort", "LoadBalancer") or (
        kind == "ClusterIP" and bool(spec.get("externalIPs"))
    )


def _secret(obj: Obj) -> None:
    _default(obj, "type", "Opaque")
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, Mapping) and string_data:
        data = _child(obj, "data", create=True)
        if data is not None:
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()


def _pvc(obj: Obj) -> None:
    _claim_spec(_child(obj, "spec", create=True))


def _namespace(obj: Obj) -> None:
    meta = _child(obj, "metadata", create=True)
    if meta is not None and meta.get("name"):
        labels = _child(meta, "labels", create=True)
        if labels is not None:
            labels["kubernetes.io/metadata.name"] = meta["name"]


def _network_policy(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    for direction in ("ingress", "egress"):
        for rule in _items(spec, direction):
            for port in _items(rule, "ports"):
                _default(port, "protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _binding(obj: Obj) -> None:
    for subject in _items(obj, "subjects"):
        if _unset(subject, "apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = _RBAC


def _crd(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    names = _child(spec, "names")
    if names is not None and names.get("kind"):
        _default(names, "singular", str(names["kind"]).lower())
        _default(names, "listKind", f"{names['kind']}List")
    if spec is not None and spec.get("conversion") is None:
        spec["conversion"] = {"strategy": "None"}


def _hpa(obj: Obj) -> None:
    spec = _child(obj, "spec", create=True)
    if spec is None:
        return  # not a map: validation's 422, not defaulting's business
    _default_none(spec, "minReplicas", 1)
    for metric in _items(spec, "metrics"):
        for source in metric.values():
            target = _child(source, "target")
            for key in ("value", "averageValue"):
                if target is not None and target.get(key) is not None:
                    target[key] = _quantity(target[key], NANO)


def _default_none(obj: Obj, key: str, value: Any) -> None:
    """Default a pointer field: only absent or null counts as unset (0 and false stay)."""
    if obj.get(key) is None:
        obj[key] = value


_HANDLERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Pod"): _pod,
    ("", "Service"): _service,
    ("", "Secret"): _secret,
    ("", "PersistentVolumeClaim"): _pvc,
    ("", "Namespace"): _namespace,
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "DaemonSet"): _daemonset,
    ("apps", "ReplicaSet"): _replicaset,
    ("", "ReplicationController"): _replication_controller,
    ("", "LimitRange"): _limit_range,
    ("", "ResourceQuota"): _resource_quota,
    ("scheduling.k8s.io", "PriorityClass"): _priority_class,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cronjob,
    ("networking.k8s.io", "NetworkPolicy"): _network_policy,
    (_RBAC, "RoleBinding"): _binding,
    (_RBAC, "ClusterRoleBinding"): _binding,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("autoscaling", "HorizontalPodAutoscaler"): _hpa,
}
