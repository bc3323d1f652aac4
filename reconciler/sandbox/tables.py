"""Server-side printing: lists and objects as a ``meta.k8s.io`` Table.

kubectl asks every ``get`` for ``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``
and prints the columns the server sends
(https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables).
The columns, their order, types and ``priority`` (1: only shown by ``kubectl get -o
wide``) and the cell values follow kube-apiserver v1.30's printers
(``pkg/printers/internalversion``): the server always fills the wide cells, kubectl
hides them. Column descriptions are the API's field documentation. Kinds without a
printer (Role, ClusterRole, CustomResourceDefinition) get the generic ``Name``/``Created
At`` table; custom resources get their CRD's ``additionalPrinterColumns`` (simple
JSONPaths: ``.a.b``, ``.a[0].b``) or the default ``Age`` column.

Each row's ``object`` is, as ``includeObject`` asks, the object's metadata as a
``PartialObjectMetadata`` (the default), the whole object (``Object``) or ``null``
(``None``). ``server.py`` calls :func:`table_version` on the Accept header and
:func:`to_table` on what a GET or list returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import Kind

_DOCS: dict[str, str] = {
    "ObjectMeta.name": (
        "Name must be unique within a namespace. Is required when creating "
        "resources, although some resources may allow a client to request the "
        "generation of an appropriate name automatically. Name is primarily "
        "intended for creation idempotence and configuration definition. Cannot "
        "be updated. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
    ),
    "ObjectMeta.creationTimestamp": (
        "CreationTimestamp is a timestamp representing the server time when this "
        "object was created. It is not guaranteed to be set in happens-before "
        "order across separate operations. Clients may not set this value. It is "
        "represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
        "Read-only. Null for lists. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    ),
    "PodStatus.podIP": (
        "podIP address allocated to the pod. Routable at least within the "
        "cluster. Empty if not yet allocated."
    ),
    "PodStatus.nominatedNodeName": (
        "nominatedNodeName is set only when this pod preempts other pods on the "
        "node, but it cannot be scheduled right away as preemption victims "
        "receive their graceful termination periods. This field does not "
        "guarantee that the pod will be scheduled on this node. Scheduler may "
        "decide to place the pod elsewhere if other nodes become available "
        "sooner. Scheduler may also decide to give the resources on this node to "
        "a higher priority pod that is created after preemption. As a result, "
        "this field may be different than PodSpec.nodeName when the pod is "
        "scheduled."
    ),
    "PodSpec.nodeName": (
        "NodeName indicates in which node this pod is scheduled. If empty, this "
        "pod is a candidate for scheduling by the scheduler defined in "
        "schedulerName. Once this field is set, the kubelet for this node becomes"
        " responsible for the lifecycle of this pod. This field should not be "
        "used to express a desire for the pod to be scheduled on a specific node."
        " "
        "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"
    ),
    "PodSpec.readinessGates": (
        "If specified, all readiness gates will be evaluated for pod readiness. A"
        " pod is ready when all its containers are ready AND all conditions "
        'specified in the readiness gates have status equal to "True" More info: '
        "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
    ),
    "PodSpec.nodeSelector": (
        "NodeSelector is a selector which must be true for the pod to fit on a "
        "node. Selector which must match a node's labels for the pod to be "
        "scheduled on that node. More info: "
        "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"
    ),
    "ServiceSpec.type": (
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid"
        " options are ExternalName, ClusterIP, NodePort, and LoadBalancer. "
        '"ClusterIP" allocates a cluster-internal IP address for load-balancing '
        "to endpoints. Endpoints are determined by the selector or if that is not"
        " specified, by manual construction of an Endpoints object or "
        'EndpointSlice objects. If clusterIP is "None", no virtual IP is '
        "allocated and the endpoints are published as a set of endpoints rather "
        'than a virtual IP. "NodePort" builds on ClusterIP and allocates a port '
        "on every node which routes to the same endpoints as the clusterIP. "
        '"LoadBalancer" builds on NodePort and creates an external load-balancer '
        "(if supported in the current cloud) which routes to the same endpoints "
        'as the clusterIP. "ExternalName" aliases this service to the specified '
        "externalName. Several other fields do not apply to ExternalName "
        "services. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"
    ),
    "ServiceSpec.clusterIP": (
        "clusterIP is the IP address of the service and is usually assigned "
        "randomly. If an address is specified manually, is in-range (as per "
        "system configuration), and is not in use, it will be allocated to the "
        "service; otherwise creation of the service will fail. This field may not"
        " be changed through updates unless the type field is also being changed "
        "to ExternalName (which requires this field to be blank) or the type "
        "field is being changed from ExternalName (in which case this field may "
        'optionally be specified, as describe above).  Valid values are "None", '
        'empty string (""), or a valid IP address. Setting this to "None" makes a'
        ' "headless service" (no virtual IP), which is useful when direct '
        "endpoint connections are preferred and proxying is not required.  Only "
        "applies to types ClusterIP, NodePort, and LoadBalancer. If this field is"
        " specified when creating a Service of type ExternalName, creation will "
        "fail. This field will be wiped when updating a Service to type "
        "ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
    ),
    "ServiceSpec.externalIPs": (
        "externalIPs is a list of IP addresses for which nodes in the cluster "
        "will also accept traffic for this service.  These IPs are not managed by"
        " Kubernetes.  The user is responsible for ensuring that traffic arrives "
        "at a node with this IP.  A common example is external load-balancers "
        "that are not part of the Kubernetes system."
    ),
    "ServiceSpec.ports": (
        "The list of ports that are exposed by this service. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
    ),
    "ServiceSpec.selector": (
        "Route service traffic to pods with label keys and values matching this "
        "selector. If empty or not present, the service is assumed to have an "
        "external process managing its endpoints, which Kubernetes will not "
        "modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. "
        "Ignored if type is ExternalName. More info: "
        "https://kubernetes.io/docs/concepts/services-networking/service/"
    ),
    "Secret.type": (
        "Used to facilitate programmatic handling of secret data. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
    ),
    "Secret.data": (
        "Data contains the secret data. Each key must consist of alphanumeric "
        "characters, '-', '_' or '.'. The serialized form of the secret data is a"
        " base64 encoded string, representing the arbitrary (possibly non-string)"
        " data value here. Described in "
        "https://tools.ietf.org/html/rfc4648#section-4"
    ),
    "ConfigMap.data": (
        "Data contains the configuration data. Each key must consist of "
        "alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte "
        "sequences must use the BinaryData field. The keys stored in Data must "
        "not overlap with the keys in the BinaryData field, this is enforced "
        "during validation process."
    ),
    "ServiceAccount.secrets": (
        "Secrets is a list of the secrets in the same namespace that pods running"
        " using this ServiceAccount are allowed to use. Pods are only limited to "
        "this list if this service account has a "
        '"kubernetes.io/enforce-mountable-secrets" annotation set to "true". The '
        '"kubernetes.io/enforce-mountable-secrets" annotation is deprecated since'
        " v1.32. Prefer separate namespaces to isolate access to mounted secrets."
        " This field should not be used to find auto-generated service account "
        "token secrets for use outside of pods. Instead, tokens can be requested "
        "directly using the TokenRequest API, or service account token secrets "
        "can be manually created. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret"
    ),
    "PersistentVolumeClaimStatus.phase": (
        "phase represents the current phase of PersistentVolumeClaim."
    ),
    "PersistentVolumeClaimStatus.capacity": (
        "capacity represents the actual resources of the underlying volume."
    ),
    "PersistentVolumeClaimStatus.accessModes": (
        "accessModes contains the actual access modes the volume backing the PVC "
        "has. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"
    ),
    "PersistentVolumeClaimSpec.volumeName": (
        "volumeName is the binding reference to the PersistentVolume backing this claim."
    ),
    "PersistentVolumeClaimSpec.volumeMode": (
        "volumeMode defines what type of volume is required by the claim. Value "
        "of Filesystem is implied when not included in claim spec."
    ),
    "Event.lastTimestamp": (
        "The time at which the most recent occurrence of this event was recorded."
    ),
    "Event.type": ("Type of this event (Normal, Warning), new types could be added in the future"),
    "Event.reason": (
        "This should be a short, machine understandable string that gives the "
        "reason for the transition into the object's current status."
    ),
    "Event.involvedObject": "The object that this event is about.",
    "Event.source": (
        "The component reporting this event. Should be a short machine understandable string."
    ),
    "Event.message": "A human-readable description of the status of this operation.",
    "Event.firstTimestamp": (
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"
    ),
    "Event.count": "The number of times this event has occurred.",
    "ObjectReference.fieldPath": (
        "If referring to a piece of an object instead of an entire object, this "
        "string should contain a valid JSON/Go field access statement, such as "
        "desiredState.manifest.containers[2]. For example, if the object "
        "reference is to a container within a pod, this would take on a value "
        'like: "spec.containers{name}" (where "name" refers to the name of the '
        "container that triggered the event) or if no container name is specified"
        ' "spec.containers[2]" (container with index 2 in this pod). This syntax '
        "is chosen only to have some well-defined way of referencing a part of an"
        " object."
    ),
    "ReplicaSetSpec.replicas": (
        "Replicas is the number of desired pods. This is a pointer to distinguish"
        " between explicit zero and unspecified. Defaults to 1. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
    ),
    "ReplicaSetSpec.selector": (
        "Selector is a label query over pods that should match the replica count."
        " If the selector is empty, it is defaulted to the labels present on the "
        "pod template. Label keys and values that must match in order to be "
        "controlled by this replica set. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
    ),
    "ReplicaSetStatus.replicas": (
        "Replicas is the most recently observed number of non-terminating pods. "
        "More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
    ),
    "ReplicaSetStatus.readyReplicas": (
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."
    ),
    "DaemonSetStatus.desiredNumberScheduled": (
        "The total number of nodes that should be running the daemon pod "
        "(including nodes correctly running the daemon pod). More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
    ),
    "DaemonSetStatus.currentNumberScheduled": (
        "The number of nodes that are running at least 1 daemon pod and are "
        "supposed to run the daemon pod. More info: "
        "https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
    ),
    "DaemonSetStatus.numberReady": (
        "The number of nodes that should be running the daemon pod and have one "
        "or more of the daemon pod running and ready."
    ),
    "DaemonSetStatus.updatedNumberScheduled": (
        "The total number of nodes that are running updated daemon pod"
    ),
    "DaemonSetStatus.numberAvailable": (
        "The number of nodes that should be running the daemon pod and have one "
        "or more of the daemon pod running and available (ready for at least "
        "spec.minReadySeconds)"
    ),
    "DaemonSetSpec.selector": (
        "A label query over pods that are managed by the daemon set. Must match "
        "in order to be controlled. If empty, defaulted to labels on Pod "
        "template. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
    ),
    "DeploymentStatus.updatedReplicas": (
        "Total number of non-terminating pods targeted by this deployment that "
        "have the desired template spec."
    ),
    "DeploymentStatus.availableReplicas": (
        "Total number of available non-terminating pods (ready for at least "
        "minReadySeconds) targeted by this deployment."
    ),
    "DeploymentSpec.selector": (
        "Label selector for pods. Existing ReplicaSets whose pods are selected by"
        " this will be the ones affected by this deployment."
    ),
    "NetworkPolicySpec.podSelector": (
        "Selects the pods to which this NetworkPolicy object applies.  The array "
        "of ingress rules is applied to any pods selected by this field. Multiple"
        " network policies can select the same set of pods.  In this case, the "
        "ingress rules for each are combined additively. This field is NOT "
        "optional and follows standard label selector semantics. An empty "
        "podSelector matches all pods in this namespace."
    ),
    "JobStatus.succeeded": (
        "The number of pods which reached phase Succeeded. The value increases "
        "monotonically for a given spec. However, it may decrease in reaction to "
        "scale down of elastic indexed jobs."
    ),
    "JobSpec.selector": (
        "A label query over pods that should match the pod count. Normally, the "
        "system sets this field for you. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
    ),
    "CronJobSpec.schedule": (
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
    ),
    "CronJobSpec.timeZone": (
        "The time zone name for the given schedule, see "
        "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not "
        "specified, this will default to the time zone of the "
        "kube-controller-manager process. The set of valid time zone names and "
        "the time zone offset is loaded from the system-wide time zone database "
        "by the API server during CronJob validation and the controller manager "
        "during execution. If no system-wide time zone database can be found a "
        "bundled version of the database is used instead. If the time zone name "
        "becomes invalid during the lifetime of a CronJob or due to a change in "
        "host configuration, the controller will stop creating new new Jobs and "
        "will create a system event with the reason UnknownTimeZone. More "
        "information can be found in "
        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"
    ),
    "CronJobSpec.suspend": (
        "This flag tells the controller to suspend subsequent executions, it does"
        " not apply to already started executions.  Defaults to false."
    ),
    "CronJobStatus.active": "A list of pointers to currently running jobs.",
    "CronJobStatus.lastScheduleTime": (
        "Information when was the last time the job was successfully scheduled."
    ),
    "HorizontalPodAutoscalerSpec.scaleTargetRef": (
        "scaleTargetRef points to the target resource to scale, and is used to "
        "the pods for which metrics should be collected, as well as to actually "
        "change the replica count."
    ),
    "HorizontalPodAutoscalerSpec.metrics": (
        "metrics contains the specifications for which to use to calculate the "
        "desired replica count (the maximum replica count across all metrics will"
        " be used).  The desired replica count is calculated multiplying the "
        "ratio between the target value and the current value by the current "
        "number of pods.  Ergo, metrics used must decrease as the pod count is "
        "increased, and vice-versa.  See the individual metric source types for "
        "more information about how each type of metric must respond. If not set,"
        " the default metric will be set to 80% average CPU utilization."
    ),
    "HorizontalPodAutoscalerSpec.minReplicas": (
        "minReplicas is the lower limit for the number of replicas to which the "
        "autoscaler can scale down.  It defaults to 1 pod.  minReplicas is "
        "allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and "
        "at least one Object or External metric is configured.  Scaling is active"
        " as long as at least one metric value is available."
    ),
    "HorizontalPodAutoscalerSpec.maxReplicas": (
        "maxReplicas is the upper limit for the number of replicas to which the "
        "autoscaler can scale up. It cannot be less that minReplicas."
    ),
    "HorizontalPodAutoscalerStatus.currentReplicas": (
        "currentReplicas is current number of replicas of pods managed by this "
        "autoscaler, as last seen by the autoscaler."
    ),
    "RoleBinding.roleRef": (
        "roleRef can reference a Role in the current namespace or a ClusterRole "
        "in the global namespace. If the RoleRef cannot be resolved, the "
        "Authorizer must return an error."
    ),
    "ClusterRoleBinding.roleRef": (
        "roleRef can only reference a ClusterRole in the global namespace. If the"
        " RoleRef cannot be resolved, the Authorizer must return an error."
    ),
    "LeaseSpec.holderIdentity": (
        "holderIdentity contains the identity of the holder of a current lease. "
        "If Coordinated Leader Election is used, the holder identity must be "
        "equal to the elected LeaseCandidate.metadata.name field."
    ),
}


TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("Metadata", "Object", "None")
_ACCEPTED = "application/json, application/yaml, application/vnd.kubernetes.protobuf"

Json = dict[str, Any]
Cells = list[Any]
Conditions = list[Json]
Printer = Callable[[Json, datetime], tuple[Cells, Conditions]]


# --- content negotiation ----------------------------------------------------------------


def _media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """The Accept header's media ranges, most preferred (highest q) first, stable."""
    ranges: list[tuple[float, int, str, dict[str, str]]] = []
    for position, clause in enumerate(accept.split(",")):
        parts = [p.strip() for p in clause.split(";")]
        if not parts[0]:
            continue
        params: dict[str, str] = {}
        for part in parts[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        ranges.append((-q, position, parts[0].lower(), params))
    return [(media, params) for _, _, media, params in sorted(ranges)]


def table_version(accept: str) -> str | None:
    """``v1``/``v1beta1`` when the client prefers a Table, None for the plain object.

    Like the API server, the first acceptable media range wins: a JSON range asking
    for ``as=Table`` of ``meta.k8s.io`` v1 or v1beta1 gets a Table, a plain JSON (or
    wildcard) range gets the object, and a header that only asks for conversions the
    server cannot make is ``406 Not Acceptable``. The sandbox answers in JSON only,
    so other media types fall back to it.
    """
    ranges = _media_ranges(accept)
    conversions = 0
    for media, params in ranges:
        if media not in ("application/json", "application/*", "*/*"):
            continue
        wanted = params.get("as")
        if not wanted:
            return None
        conversions += 1
        if (
            wanted == "Table"
            and params.get("g") == TABLE_GROUP
            and params.get("v") in TABLE_VERSIONS
        ):
            return params["v"]
    if ranges and conversions == len(ranges):
        raise ApiError(406, f"only the following media types are accepted: {_ACCEPTED}")
    return None


# --- formatting helpers (Go's printers, in Python) -------------------------------------


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ~2-3 significant figures, as every Age cell shows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when unset."""
    moment = parse_time(value)
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    pairs = sorted(f"{k}={v}" for k, v in _map(labels).items())
    return ",".join(pairs) or "<none>"


def selector_string(selector: Any) -> str | None:
    """``LabelSelectorAsSelector(...).String()``; None for a selector that does not parse.

    ``{}`` selects everything and ``null`` nothing; both print as ``""``.
    """
    sel = _map(selector)
    requirements: list[tuple[str, str]] = []
    for key, value in _map(sel.get("matchLabels")).items():
        requirements.append((str(key), f"{key}={value}"))
    for expr in _list(sel.get("matchExpressions")):
        expr = _map(expr)
        key, op = str(expr.get("key", "")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in _list(expr.get("values"))))
        if op == "In":
            requirements.append((key, f"{key} in ({values})"))
        elif op == "NotIn":
            requirements.append((key, f"{key} notin ({values})"))
        elif op == "Exists":
            requirements.append((key, key))
        elif op == "DoesNotExist":
            requirements.append((key, f"!{key}"))
        else:
            return None
    return ",".join(text for _, text in sorted(requirements, key=lambda r: r[0]))


def format_label_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` for an empty selector, ``<error>`` if bad."""
    text = selector_string(selector)
    if text is None:
        return "<error>"
    return text or "<none>"


def _bool(value: Any) -> str:
    """``printBoolPtr``."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return "<unset>"


def _containers(template_spec: Any) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma separated."""
    containers = [_map(c) for c in _list(_map(template_spec).get("containers"))]
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def _template_spec(obj: Json) -> Any:
    return _map(_map(_map(obj.get("spec")).get("template")).get("spec"))


def _name(obj: Json) -> str:
    return str(_map(obj.get("metadata")).get("name", ""))


def _age(obj: Json, now: datetime) -> str:
    return since(_map(obj.get("metadata")).get("creationTimestamp"), now)


# --- column definitions -------------------------------------------------------------------


def _col(name: str, desc: str, kind: str = "string", *, fmt: str = "", priority: int = 0) -> Json:
    return {"name": name, "type": kind, "format": fmt, "description": desc, "priority": priority}


NAME = _col("Name", _DOCS["ObjectMeta.name"], fmt="name")
AGE = _col("Age", _DOCS["ObjectMeta.creationTimestamp"])
CONTAINERS = _col("Containers", "Names of each container in the template.", priority=1)
IMAGES = _col("Images", "Images referenced by each container in the template.", priority=1)
CREATED_AT = _col("Created At", _DOCS["ObjectMeta.creationTimestamp"], "date")


def _wide_template(obj: Json, selector: str) -> Cells:
    names, images = _containers(_template_spec(obj))
    return [names, images, selector]


# --- printers -------------------------------------------------------------------------------

_SUCCEEDED = [
    {
        "type": "Completed",
        "status": "True",
        "reason": "Succeeded",
        "message": "The pod has completed successfully.",
    }
]
_FAILED = [
    {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
]


def _restartable(container: Mapping[str, Any] | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _terminated_reason(terminated: Mapping[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return f"{prefix}{terminated['reason']}"
    if _int(terminated.get("signal")):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{_int(terminated.get('exitCode'))}"


def _condition_true(conditions: Any, kind: str) -> bool:
    for condition in _list(conditions):
        condition = _map(condition)
        if condition.get("type") == kind:
            return condition.get("status") == "True"
    return False


def print_pod(pod: Json, now: datetime) -> tuple[Cells, Conditions]:
    """``printPod``: READY n/m, the kubelet's reason as STATUS, RESTARTS with the last one."""
    spec, status = _map(pod.get("spec")), _map(pod.get("status"))
    phase = str(status.get("phase", ""))
    reason = str(status.get("reason") or phase)
    for condition in _list(status.get("conditions")):
        condition = _map(condition)
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    conditions = _SUCCEEDED if phase == "Succeeded" else _FAILED if phase == "Failed" else []
    init_specs = {str(_map(c).get("name")): _map(c) for c in _list(spec.get("initContainers"))}
    total = len(_list(spec.get("containers"))) + sum(map(_restartable, init_specs.values()))
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    def later(a: datetime | None, b: Any) -> datetime | None:
        moment = parse_time(b)
        return moment if moment is not None and (a is None or moment > a) else a

    initializing = False
    init_statuses = [_map(s) for s in _list(status.get("initContainerStatuses"))]
    for i, cs in enumerate(init_statuses):
        state, last = _map(cs.get("state")), _map(_map(cs.get("lastState")).get("terminated"))
        restarts += _int(cs.get("restartCount"))
        last_restart = later(last_restart, last.get("finishedAt"))
        sidecar = _restartable(init_specs.get(str(cs.get("name"))))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            last_sidecar_restart = later(last_sidecar_restart, last.get("finishedAt"))
        terminated, waiting = _map(state.get("terminated")), _map(state.get("waiting"))
        if terminated and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(status.get("conditions"), "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for cs in reversed([_map(s) for s in _list(status.get("containerStatuses"))]):
            state, last = _map(cs.get("state")), _map(_map(cs.get("lastState")).get("terminated"))
            restarts += _int(cs.get("restartCount"))
            last_restart = later(last_restart, last.get("finishedAt"))
            waiting, terminated = _map(state.get("waiting")), _map(state.get("terminated"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated:
                reason = _terminated_reason(terminated)
            elif cs.get("ready") and "running" in state:
                running = True
                ready += 1
        if reason == "Completed" and running:
            ready_condition = _condition_true(status.get("conditions"), "Ready")
            reason = "Running" if ready_condition else "NotReady"
    if _map(pod.get("metadata")).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    ips = [_map(ip).get("ip") for ip in _list(status.get("podIPs"))]
    gates = _list(spec.get("readinessGates"))
    gates_text = "<none>"
    if gates:
        true = sum(
            1
            for gate in gates
            if _condition_true(status.get("conditions"), str(_map(gate).get("conditionType")))
        )
        gates_text = f"{true}/{len(gates)}"
    cells: Cells = [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        (ips[0] if ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]
    return cells, conditions


def print_deployment(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    selector = selector_string(spec.get("selector"))
    return [
        _name(obj),
        f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        *_wide_template(obj, "<invalid>" if selector is None else selector),
    ], []


def print_replicaset(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    return [
        _name(obj),
        _int(spec.get("replicas")),
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        *_wide_template(obj, format_label_selector(spec.get("selector"))),
    ], []


def print_statefulset(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    names, images = _containers(_template_spec(obj))
    ready = f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}"
    return [_name(obj), ready, _age(obj, now), names, images], []


def print_daemonset(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    counts = (
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    )
    return [
        _name(obj),
        *(_int(status.get(c)) for c in counts),
        format_labels(_map(_template_spec(obj)).get("nodeSelector")),
        _age(obj, now),
        *_wide_template(obj, format_label_selector(spec.get("selector"))),
    ], []


def _job_status(obj: Json) -> str:
    conditions = _map(obj.get("status")).get("conditions")
    if _condition_true(conditions, "Complete"):
        return "Complete"
    if _condition_true(conditions, "Failed"):
        return "Failed"
    if _map(obj.get("metadata")).get("deletionTimestamp"):
        return "Terminating"
    if _condition_true(conditions, "Suspended"):
        return "Suspended"
    if _condition_true(conditions, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def print_job(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    started, finished = (
        parse_time(status.get("startTime")),
        parse_time(status.get("completionTime")),
    )
    duration = ""
    if started is not None:
        duration = human_duration(((finished or now) - started).total_seconds())
    return [
        _name(obj),
        _job_status(obj),
        completions,
        duration,
        _age(obj, now),
        *_wide_template(obj, format_label_selector(spec.get("selector"))),
    ], []


def print_cronjob(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    job_spec = _map(_map(spec.get("jobTemplate")).get("spec"))
    names, images = _containers(_map(_map(job_spec.get("template")).get("spec")))
    last = status.get("lastScheduleTime")
    return [
        _name(obj),
        str(spec.get("schedule", "")),
        spec.get("timeZone") or "<none>",
        _bool(spec.get("suspend")),
        len(_list(status.get("active"))),
        since(last, now) if last else "<none>",
        _age(obj, now),
        names,
        images,
        format_label_selector(job_spec.get("selector")),
    ], []


def _lb_addresses(status: Any) -> str:
    ingress = [_map(i) for i in _list(_map(_map(status).get("loadBalancer")).get("ingress"))]
    found = {
        str(i.get("ip") or i.get("hostname")) for i in ingress if i.get("ip") or i.get("hostname")
    }
    return ",".join(sorted(found))


def _external_ip(svc: Json) -> str:
    spec = _map(svc.get("spec"))
    external = [str(ip) for ip in _list(spec.get("externalIPs"))]
    kind = spec.get("type") or "ClusterIP"
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        lb = _lb_addresses(svc.get("status"))
        if external:
            return ",".join([*(lb.split(",") if lb else []), *external])
        return lb or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName", ""))
    return "<unknown>"


def print_service(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec = _map(obj.get("spec"))
    ports = []
    for port in (_map(p) for p in _list(spec.get("ports"))):
        protocol = port.get("protocol") or "TCP"
        node_port = _int(port.get("nodePort"))
        text = f"{_int(port.get('port'))}/{protocol}"
        if node_port > 0:
            text = f"{_int(port.get('port'))}:{node_port}/{protocol}"
        ports.append(text)
    cluster_ips = _list(spec.get("clusterIPs")) or (
        [spec["clusterIP"]] if spec.get("clusterIP") else []
    )
    return [
        _name(obj),
        str(spec.get("type") or "ClusterIP"),
        str(cluster_ips[0]) if cluster_ips else "<none>",
        _external_ip(obj),
        ",".join(ports) or "<none>",
        _age(obj, now),
        format_labels(spec.get("selector")),
    ], []


def print_ingress(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec = _map(obj.get("spec"))
    rules = [_map(r) for r in _list(spec.get("rules"))]
    hosts = [str(r["host"]) for r in rules if r.get("host")][:3]
    hosts_text = ",".join(hosts) or "*"
    if len(rules) > 3 and hosts:
        hosts_text = f"{hosts_text} + {len(rules) - 3} more..."
    return [
        _name(obj),
        spec.get("ingressClassName") or "<none>",
        hosts_text,
        _lb_addresses(obj.get("status")),
        "80, 443" if _list(spec.get("tls")) else "80",
        _age(obj, now),
    ], []


def print_namespace(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    return [_name(obj), str(_map(obj.get("status")).get("phase", "")), _age(obj, now)], []


def print_configmap(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    count = len(_map(obj.get("data"))) + len(_map(obj.get("binaryData")))
    return [_name(obj), count, _age(obj, now)], []


def print_secret(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    kind = obj.get("type") or "Opaque"
    keys = {*_map(obj.get("data")), *_map(obj.get("stringData"))}  # stored merged on a cluster
    return [_name(obj), str(kind), len(keys), _age(obj, now)], []


def print_serviceaccount(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    return [_name(obj), len(_list(obj.get("secrets"))), _age(obj, now)], []


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def print_pvc(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    phase = "Terminating" if meta.get("deletionTimestamp") else str(status.get("phase", ""))
    capacity = modes = ""
    if spec.get("volumeName"):
        held = {str(m) for m in _list(status.get("accessModes"))}
        modes = ",".join(short for mode, short in _ACCESS_MODES if mode in held)
        capacity = str(_map(status.get("capacity")).get("storage", ""))
    annotations = _map(meta.get("annotations"))
    storage_class = annotations.get("volume.beta.kubernetes.io/storage-class")
    if storage_class is None:
        storage_class = spec.get("storageClassName") or ""
    return [
        _name(obj),
        phase,
        str(spec.get("volumeName", "")),
        capacity,
        modes,
        str(storage_class),
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(obj, now),
        spec.get("volumeMode") or "<unset>",
    ], []


def _int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)


def print_pdb(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    return [
        _name(obj),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        _int(status.get("disruptionsAllowed")),
        _age(obj, now),
    ], []


def _hpa_metric(spec: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    kind = spec.get("type")
    source = _map(spec.get(str(kind)[:1].lower() + str(kind)[1:] if kind else ""))
    target = _map(source.get("target"))
    now_source = _map(current.get(str(kind)[:1].lower() + str(kind)[1:] if kind else ""))
    now_value = _map(now_source.get("current"))
    if kind == "Resource" and target.get("averageValue") is None:
        value = now_value.get("averageUtilization")
        shown = f"{value}%" if value is not None else "<unknown>"
        goal = target.get("averageUtilization")
        return f"{source.get('name')}: {shown}/{f'{goal}%' if goal is not None else '<auto>'}"
    if kind == "Resource":
        value = now_value.get("averageValue") or "<unknown>"
        return f"{source.get('name')}: {value}/{target.get('averageValue')}"
    if target.get("averageValue") is not None:
        value = now_value.get("averageValue") or "<unknown>"
        suffix = "" if kind == "Pods" else " (avg)"
        return f"{value}/{target.get('averageValue')}{suffix}"
    return f"{now_value.get('value') or '<unknown>'}/{target.get('value')}"


def print_hpa(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    ref = _map(spec.get("scaleTargetRef"))
    metrics = [_map(m) for m in _list(spec.get("metrics"))]
    if "targetCPUUtilizationPercentage" in spec:  # autoscaling/v1
        utilization = spec["targetCPUUtilizationPercentage"]
        target = {"type": "Utilization", "averageUtilization": utilization}
        metrics = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    statuses = [_map(m) for m in _list(status.get("currentMetrics"))]
    if "currentCPUUtilizationPercentage" in status:
        current = {"averageUtilization": status["currentCPUUtilizationPercentage"]}
        statuses = [{"type": "Resource", "resource": {"name": "cpu", "current": current}}]
    texts = [
        _hpa_metric(m, statuses[i] if i < len(statuses) else {}) for i, m in enumerate(metrics)
    ]
    targets = ", ".join(texts[:2]) or "<none>"
    if len(texts) > 2:
        targets = f"{targets} + {len(texts) - 2} more..."
    minimum = spec.get("minReplicas")
    return [
        _name(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        targets,
        "<unset>" if minimum is None else str(minimum),
        _int(spec.get("maxReplicas")),
        _int(status.get("currentReplicas")),
        _age(obj, now),
    ], []


def print_networkpolicy(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    selector = _map(obj.get("spec")).get("podSelector")
    return [_name(obj), format_label_selector(selector), _age(obj, now)], []


def print_binding(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    ref = _map(obj.get("roleRef"))
    users: list[str] = []
    groups: list[str] = []
    accounts: list[str] = []
    for subject in (_map(s) for s in _list(obj.get("subjects"))):
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}:{name}")
    return [
        _name(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ], []


def print_lease(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    holder = _map(obj.get("spec")).get("holderIdentity") or ""
    return [_name(obj), str(holder), _age(obj, now)], []


def print_event(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    first = since(obj.get("firstTimestamp"), now)
    if not obj.get("firstTimestamp"):
        first = since(obj.get("eventTime"), now)
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = _int(obj.get("count"))
    series = _map(obj.get("series"))
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = _map(obj.get("involvedObject"))
    target = str(involved.get("kind", "")).lower()
    if involved.get("name"):
        target = f"{target}/{involved['name']}"
    source = _map(obj.get("source"))
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return [
        last,
        str(obj.get("type", "")),
        str(obj.get("reason", "")),
        target,
        str(involved.get("fieldPath", "")),
        f"{component}, {instance}" if instance else str(component),
        str(obj.get("message", "")).strip(),
        first,
        count,
        _name(obj),
    ], []


def print_default(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    """The generic convertor's cells: the name and creationTimestamp in RFC 3339, UTC."""
    created = parse_time(_map(obj.get("metadata")).get("creationTimestamp"))
    stamp = (
        created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if created
        else "0001-01-01T00:00:00Z"
    )
    return [_name(obj), stamp], []


def print_replication_controller(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    spec = _map(obj.get("spec"))
    selector = format_labels(spec.get("selector")) if spec.get("selector") else "<none>"
    return [*print_replicaset(obj, now)[0][:-1], selector], []


def _more(items: list[str], total: int) -> str:
    """``formatEndpoints``' cap: three shown, then ``+ N more...``."""
    text = ",".join(items[:3])
    return f"{text} + {total - 3} more..." if total > 3 else text


def print_endpoints(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    pairs = [
        f"{_map(a).get('ip')}:{_map(p).get('port')}"
        for subset in map(_map, _list(obj.get("subsets")))
        for p in _list(subset.get("ports"))
        for a in _list(subset.get("addresses"))
    ]
    return [_name(obj), _more(pairs, len(pairs)) or "<none>", _age(obj, now)], []


def print_endpointslice(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    ports = [str(_map(p).get("port")) for p in _list(obj.get("ports"))]
    addresses = [
        str(a) for e in _list(obj.get("endpoints")) for a in _list(_map(e).get("addresses"))
    ]
    return [
        _name(obj),
        str(obj.get("addressType", "")),
        ",".join(ports) or "<unset>",
        _more(addresses, len(addresses)) or "<unset>",
        _age(obj, now),
    ], []


def print_resource_quota(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    status = _map(obj.get("status"))
    hard, used = _map(status.get("hard")), _map(status.get("used"))
    requests: list[str] = []
    limits: list[str] = []
    for key in sorted(hard):
        text = f"{key}: {used.get(key, '0')}/{hard[key]}"
        (limits if key.startswith("limits.") else requests).append(text)
    return [_name(obj), _age(obj, now), ", ".join(requests), ", ".join(limits)], []


def print_priority_class(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    return [
        _name(obj),
        _int(obj.get("value")),
        bool(obj.get("globalDefault")),
        _age(obj, now),
        str(obj.get("preemptionPolicy") or ""),
    ], []


def print_api_service(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
    service = _map(_map(obj.get("spec")).get("service"))
    where = f"{service.get('namespace')}/{service.get('name')}" if service else "Local"
    available = "Unknown"
    for condition in map(_map, _list(_map(obj.get("status")).get("conditions"))):
        if condition.get("type") == "Available":
            available = str(condition.get("status"))
            if available != "True":
                available += f" ({condition.get('reason')})"
    return [_name(obj), where, available, _age(obj, now)], []


def _d(key: str) -> str:
    return _DOCS[key]


_TEMPLATE_WIDE = (CONTAINERS, IMAGES)
# a ReplicationController prints as a ReplicaSet does (its fields document alike)
_REPLICA_COLUMNS = [
    NAME,
    _col("Desired", _d("ReplicaSetSpec.replicas"), "integer"),
    _col("Current", _d("ReplicaSetStatus.replicas"), "integer"),
    _col("Ready", _d("ReplicaSetStatus.readyReplicas"), "integer"),
    AGE,
    *_TEMPLATE_WIDE,
    _col("Selector", _d("ReplicaSetSpec.selector"), priority=1),
]
_PRINTERS: dict[tuple[str, str], tuple[list[Json], Printer]] = {
    ("", "Pod"): (
        [
            NAME,
            _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "The number of times the containers in this pod have been restarted and "
                "when the last container in this pod has restarted.",
            ),
            AGE,
            _col("IP", _d("PodStatus.podIP"), priority=1),
            _col("Node", _d("PodSpec.nodeName"), priority=1),
            _col("Nominated Node", _d("PodStatus.nominatedNodeName"), priority=1),
            _col("Readiness Gates", _d("PodSpec.readinessGates"), priority=1),
        ],
        print_pod,
    ),
    ("apps", "Deployment"): (
        [
            NAME,
            _col("Ready", "Number of the pod with ready state"),
            _col("Up-to-date", _d("DeploymentStatus.updatedReplicas")),
            _col("Available", _d("DeploymentStatus.availableReplicas")),
            AGE,
            *_TEMPLATE_WIDE,
            _col("Selector", _d("DeploymentSpec.selector"), priority=1),
        ],
        print_deployment,
    ),
    ("apps", "ReplicaSet"): (_REPLICA_COLUMNS, print_replicaset),
    ("", "ReplicationController"): (_REPLICA_COLUMNS, print_replication_controller),
    ("", "Endpoints"): (
        [NAME, _col("Endpoints", "Endpoints of the service"), AGE],
        print_endpoints,
    ),
    ("discovery.k8s.io", "EndpointSlice"): (
        [
            NAME,
            _col("AddressType", "The type of addresses this slice holds."),
            _col("Ports", "The ports of the endpoints in this slice."),
            _col("Endpoints", "The addresses of the endpoints in this slice."),
            AGE,
        ],
        print_endpointslice,
    ),
    ("", "ResourceQuota"): (
        [
            NAME,
            AGE,
            _col(
                "Request",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            _col(
                "Limit",
                "Limits control the maximum amount of cpu/memory that a container may use "
                "independent of contention on the node.",
            ),
        ],
        print_resource_quota,
    ),
    ("scheduling.k8s.io", "PriorityClass"): (
        [
            NAME,
            _col("Value", "The value of this priority class.", "integer"),
            _col(
                "Global-Default", "Whether this is the cluster's default priority class.", "boolean"
            ),
            AGE,
            _col("PreemptionPolicy", "Whether pods of this class may preempt lower ones."),
        ],
        print_priority_class,
    ),
    ("apiregistration.k8s.io", "APIService"): (
        [
            NAME,
            _col("Service", "The reference to the service that hosts this API endpoint."),
            _col("Available", "Whether this service is available."),
            AGE,
        ],
        print_api_service,
    ),
    ("apps", "StatefulSet"): (
        [NAME, _col("Ready", "Number of the pod with ready state"), AGE, *_TEMPLATE_WIDE],
        print_statefulset,
    ),
    ("apps", "DaemonSet"): (
        [
            NAME,
            _col("Desired", _d("DaemonSetStatus.desiredNumberScheduled"), "integer"),
            _col("Current", _d("DaemonSetStatus.currentNumberScheduled"), "integer"),
            _col("Ready", _d("DaemonSetStatus.numberReady"), "integer"),
            _col("Up-to-date", _d("DaemonSetStatus.updatedNumberScheduled"), "integer"),
            _col("Available", _d("DaemonSetStatus.numberAvailable"), "integer"),
            _col("Node Selector", _d("PodSpec.nodeSelector")),
            AGE,
            *_TEMPLATE_WIDE,
            _col("Selector", _d("DaemonSetSpec.selector"), priority=1),
        ],
        print_daemonset,
    ),
    ("batch", "Job"): (
        [
            NAME,
            _col("Status", "Status of the job."),
            _col("Completions", _d("JobStatus.succeeded")),
            _col("Duration", "Time required to complete the job."),
            AGE,
            *_TEMPLATE_WIDE,
            _col("Selector", _d("JobSpec.selector"), priority=1),
        ],
        print_job,
    ),
    ("batch", "CronJob"): (
        [
            NAME,
            _col("Schedule", _d("CronJobSpec.schedule")),
            _col("Timezone", _d("CronJobSpec.timeZone")),
            _col("Suspend", _d("CronJobSpec.suspend"), "boolean"),
            _col("Active", _d("CronJobStatus.active"), "integer"),
            _col("Last Schedule", _d("CronJobStatus.lastScheduleTime")),
            AGE,
            *_TEMPLATE_WIDE,
            _col("Selector", _d("JobSpec.selector"), priority=1),
        ],
        print_cronjob,
    ),
    ("", "Service"): (
        [
            NAME,
            _col("Type", _d("ServiceSpec.type")),
            _col("Cluster-IP", _d("ServiceSpec.clusterIP")),
            _col("External-IP", _d("ServiceSpec.externalIPs")),
            _col("Port(s)", _d("ServiceSpec.ports")),
            AGE,
            _col("Selector", _d("ServiceSpec.selector"), priority=1),
        ],
        print_service,
    ),
    ("networking.k8s.io", "Ingress"): (
        [
            NAME,
            _col(
                "Class",
                "The name of the IngressClass resource that should be used for additional "
                "configuration",
            ),
            _col(
                "Hosts", "Hosts that incoming requests are matched against before the ingress rule"
            ),
            _col("Address", "Address is a list containing ingress points for the load-balancer"),
            _col("Ports", "Ports of TLS configurations that open"),
            AGE,
        ],
        print_ingress,
    ),
    ("", "Namespace"): (
        [NAME, _col("Status", "The status of the namespace"), AGE],
        print_namespace,
    ),
    ("", "ConfigMap"): ([NAME, _col("Data", _d("ConfigMap.data")), AGE], print_configmap),
    ("", "Secret"): (
        [NAME, _col("Type", _d("Secret.type")), _col("Data", _d("Secret.data")), AGE],
        print_secret,
    ),
    ("", "ServiceAccount"): (
        [NAME, _col("Secrets", _d("ServiceAccount.secrets")), AGE],
        print_serviceaccount,
    ),
    ("", "PersistentVolumeClaim"): (
        [
            NAME,
            _col("Status", _d("PersistentVolumeClaimStatus.phase")),
            _col("Volume", _d("PersistentVolumeClaimSpec.volumeName")),
            _col("Capacity", _d("PersistentVolumeClaimStatus.capacity")),
            _col("Access Modes", _d("PersistentVolumeClaimStatus.accessModes")),
            _col("StorageClass", "StorageClass of the pvc"),
            _col("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
            AGE,
            _col("VolumeMode", _d("PersistentVolumeClaimSpec.volumeMode"), priority=1),
        ],
        print_pvc,
    ),
    ("policy", "PodDisruptionBudget"): (
        [
            NAME,
            _col("Min Available", "The minimum number of pods that must be available."),
            _col("Max Unavailable", "The maximum number of pods that may be unavailable."),
            _col(
                "Allowed Disruptions",
                "Calculated number of pods that may be disrupted at this time.",
                "integer",
            ),
            AGE,
        ],
        print_pdb,
    ),
    ("autoscaling", "HorizontalPodAutoscaler"): (
        [
            NAME,
            _col("Reference", _d("HorizontalPodAutoscalerSpec.scaleTargetRef")),
            _col("Targets", _d("HorizontalPodAutoscalerSpec.metrics")),
            _col("MinPods", _d("HorizontalPodAutoscalerSpec.minReplicas")),
            _col("MaxPods", _d("HorizontalPodAutoscalerSpec.maxReplicas")),
            _col("Replicas", _d("HorizontalPodAutoscalerStatus.currentReplicas")),
            AGE,
        ],
        print_hpa,
    ),
    ("networking.k8s.io", "NetworkPolicy"): (
        [NAME, _col("Pod-Selector", _d("NetworkPolicySpec.podSelector")), AGE],
        print_networkpolicy,
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): (
        [
            NAME,
            _col("Role", _d("RoleBinding.roleRef")),
            AGE,
            _col("Users", "Users in the roleBinding", priority=1),
            _col("Groups", "Groups in the roleBinding", priority=1),
            _col("ServiceAccounts", "ServiceAccounts in the roleBinding", priority=1),
        ],
        print_binding,
    ),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (
        [
            NAME,
            _col("Role", _d("ClusterRoleBinding.roleRef")),
            AGE,
            _col("Users", "Users in the clusterRoleBinding", priority=1),
            _col("Groups", "Groups in the clusterRoleBinding", priority=1),
            _col("ServiceAccounts", "ServiceAccounts in the clusterRoleBinding", priority=1),
        ],
        print_binding,
    ),
    ("coordination.k8s.io", "Lease"): (
        [NAME, _col("Holder", _d("LeaseSpec.holderIdentity")), AGE],
        print_lease,
    ),
    ("", "Event"): (
        [
            _col("Last Seen", _d("Event.lastTimestamp")),
            _col("Type", _d("Event.type")),
            _col("Reason", _d("Event.reason")),
            _col("Object", _d("Event.involvedObject")),
            _col("Subobject", _d("ObjectReference.fieldPath"), priority=1),
            _col("Source", _d("Event.source"), priority=1),
            _col("Message", _d("Event.message")),
            _col("First Seen", _d("Event.firstTimestamp"), priority=1),
            _col("Count", _d("Event.count"), priority=1),
            _col("Name", _d("ObjectMeta.name"), fmt="name", priority=1),
        ],
        print_event,
    ),
}
_DEFAULT = ([NAME, CREATED_AT], print_default)


# --- custom resources ------------------------------------------------------------------------


def _jsonpath(obj: Any, path: str) -> tuple[bool, Any]:
    """(found, value) for the simple JSONPaths printer columns use: ``.a.b``, ``.a[0].b``."""
    value = obj
    for part in path.strip().lstrip(".").replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].lstrip("-").isdigit():
            index = int(part[1:-1])
            if not isinstance(value, list) or not -len(value) <= index < len(value):
                return False, None
            value = value[index]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return False, None
    return True, value


def go_text(value: Any) -> str:
    """A JSON value as kubectl's JSONPath printer writes it (Go's ``fmt.Fprint``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_text(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_text(v) for v in value) + "]"
    return str(value)


def _crd_cell(kind: str, value: Any, now: datetime) -> Any:
    """``cellForJSONValue``: the value typed as the column says, None when it is not."""
    if value is None:
        return None
    if kind == "string":
        return go_text(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        moment = parse_time(value)
        return "<invalid>" if moment is None else human_duration((now - moment).total_seconds())
    return None


def crd_printer(crd: Mapping[str, Any] | None, version: str) -> tuple[list[Json], Printer]:
    """Columns and cells of a custom resource: its version's ``additionalPrinterColumns``."""
    columns: list[Mapping[str, Any]] = []
    for served in _list(_map(_map(crd).get("spec")).get("versions")):
        if _map(served).get("name") == version:
            columns = [_map(c) for c in _list(_map(served).get("additionalPrinterColumns"))]
    if not columns:
        columns = [
            {
                "name": "Age",
                "type": "date",
                "jsonPath": ".metadata.creationTimestamp",
                "description": _DOCS["ObjectMeta.creationTimestamp"],
            }
        ]
    definitions = [NAME]
    for column in columns:
        path = str(column.get("jsonPath", ""))
        desc = column.get("description") or (
            f"Custom resource definition column (in JSONPath format): {path}"
        )
        definitions.append(
            _col(
                str(column.get("name", "")),
                str(desc),
                str(column.get("type", "string")),
                fmt=str(column.get("format", "")),
                priority=_int(column.get("priority")),
            )
        )

    def printer(obj: Json, now: datetime) -> tuple[Cells, Conditions]:
        cells: Cells = [_name(obj)]
        for column in columns:
            found, value = _jsonpath(obj, str(column.get("jsonPath", "")))
            cells.append(
                _crd_cell(str(column.get("type", "string")), value, now) if found else None
            )
        return cells, []

    return definitions, printer


# --- the Table ---------------------------------------------------------------------------------


def printer_for(kind: Kind, crd: Mapping[str, Any] | None = None) -> tuple[list[Json], Printer]:
    """The columns and row printer of ``kind`` (``crd``: its definition, for custom kinds)."""
    if kind.crd:
        return crd_printer(crd, kind.version)
    return _PRINTERS.get((kind.group, kind.kind), _DEFAULT)


def _row_object(obj: Json, include: str, version: str) -> Json | None:
    if include == "Object":
        return obj
    if include == "None":
        return None
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    kind: Kind,
    body: Json,
    *,
    version: str = "v1",
    include_object: str = "",
    crd: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Json:
    """``body`` (an object or a ``<Kind>List``) as a Table, as ``kubectl get`` receives it."""
    include = include_object or "Metadata"
    if include not in INCLUDE_OBJECT:
        raise ApiError(400, f'unrecognized includeObject value: "{include_object}"')
    columns, printer = printer_for(kind, crd)
    moment = now or datetime.now(UTC)
    is_list = isinstance(body.get("items"), list)
    items: Iterable[Json] = body["items"] if is_list else [body]
    rows = []
    for obj in items:
        cells, conditions = printer(obj, moment)
        row: Json = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        row["object"] = _row_object(obj, include, version)
        rows.append(row)
    meta = _map(body.get("metadata"))
    keys = (
        ("resourceVersion", "continue", "remainingItemCount") if is_list else ("resourceVersion",)
    )
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": {k: meta[k] for k in keys if k in meta},
        "columnDefinitions": columns,
        "rows": rows,
    }
