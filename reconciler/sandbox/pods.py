"""The simulated kubelet's view of one Pod: its ``status`` and its container log.

A real kubelet reports a Pod's ``phase``, ``podIP``, per-container ``containerStatuses``
(``ready``, ``restartCount``, ``state`` waiting/running/terminated with reasons) and the
conditions ``PodScheduled``/``Initialized``/``ContainersReady``/``Ready``
(https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/ and
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus).
Health checks, ``kubectl describe`` and migration hooks read exactly those fields, so
the sandbox writes them with the same shape. :func:`pod_status_at` is the lifecycle
over time (bound to a node, containers being created, running, Ready after the image's
readiness delay; a run-to-completion pod ``Succeeded`` or ``Failed`` after it ran);
every function is pure: a settled pod computes the same status again (timestamps are
carried over) and is not rewritten.

Failure injection: the annotation ``sandbox.reconciler.dev/fail`` on the pod (or its
template) set to ``ImagePullBackOff`` keeps the pod ``Pending`` with its containers
waiting on the image; ``CrashLoopBackOff`` or ``true``, or an image matching one of the
server's ``fail_images`` globs, gives a container that keeps crashing. The annotation
``sandbox.reconciler.dev/log`` adds its lines to every container's simulated output.

A pod being deleted (``termination.py``) is reported not Ready while its grace period
runs (:func:`stopping_status`), then with its containers terminated by the kill that
ends the grace period (exit code 137) and the terminal phase the kubelet reports
before the pod goes (:func:`killed_status`).

Not simulated: back-off timing (``restartCount`` stays at 1), probes, resource usage,
containers that exit on SIGTERM before their grace period ends, in-place restarts of
``restartPolicy: OnFailure`` containers (the pod fails, as with ``Never``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.apply import now

FAIL_ANNOTATION = "sandbox.reconciler.dev/fail"
LOG_ANNOTATION = "sandbox.reconciler.dev/log"
CRASH_LOOP = "CrashLoopBackOff"
IMAGE_PULL = "ImagePullBackOff"
_CRASH_MARKS = {"true", CRASH_LOOP.lower()}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]


def pod_failure(pod: Mapping[str, Any], fail_images: Sequence[str]) -> str:
    """``""`` for a healthy pod, else the waiting reason its containers end up in."""
    mark = str(_annotations(pod).get(FAIL_ANNOTATION, "")).lower()
    if mark == IMAGE_PULL.lower():
        return IMAGE_PULL
    if mark in _CRASH_MARKS:
        return CRASH_LOOP
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    images = [str(c.get("image", "")) for c in containers if isinstance(c, Mapping)]
    if any(fnmatchcase(image, pattern) for image in images for pattern in fail_images):
        return CRASH_LOOP
    return ""


def pod_ip(pod: Mapping[str, Any]) -> str:
    """A stable address in 10.244.0.0/16 derived from the pod's uid."""
    digest = hashlib.sha256(str(pod["metadata"].get("uid", "")).encode()).digest()
    return f"10.244.{digest[0]}.{digest[1] % 254 + 1}"


def _pod_condition(
    old: Mapping[str, Any], type_: str, ok: bool, reason: str = "", message: str = ""
) -> dict[str, Any]:
    status = "True" if ok else "False"
    previous: Mapping[str, Any] = next(
        (c for c in old.get("conditions") or [] if c.get("type") == type_), {}
    )
    stamp = previous.get("lastTransitionTime") if previous.get("status") == status else None
    condition: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": stamp or now(),
    }
    if not ok:
        condition["reason"] = reason
        condition["message"] = message
    return condition


def _container_status(
    pod: Mapping[str, Any], container: Mapping[str, Any], failure: str, old: Mapping[str, Any]
) -> dict[str, Any]:
    name = str(container.get("name", ""))
    image = str(container.get("image", ""))
    previous: Mapping[str, Any] = next(
        (c for c in old.get("containerStatuses") or [] if c.get("name") == name), {}
    )
    meta = pod["metadata"]
    started = ((previous.get("state") or {}).get("running") or {}).get("startedAt")
    status: dict[str, Any] = {
        "name": name,
        "image": image,
        "imageID": "" if failure == IMAGE_PULL else f"sandbox://{image}",
        "ready": not failure,
        "started": not failure,
        "restartCount": 1 if failure == CRASH_LOOP else 0,
    }
    if failure == IMAGE_PULL:
        message = f'Back-off pulling image "{image}"'
        status["state"] = {"waiting": {"reason": IMAGE_PULL, "message": message}}
        status["lastState"] = {}
        return status
    status["containerID"] = f"sandbox://{meta.get('uid', '')}/{name}"
    if failure == CRASH_LOOP:
        message = (
            f"back-off 10s restarting failed container={name} "
            f"pod={meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})"
        )
        last = (previous.get("lastState") or {}).get("terminated") or {}
        stamp = last.get("finishedAt") or now()
        status["state"] = {"waiting": {"reason": CRASH_LOOP, "message": message}}
        status["lastState"] = {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": last.get("startedAt") or stamp,
                "finishedAt": stamp,
                "containerID": status["containerID"],
            }
        }
        return status
    status["state"] = {"running": {"startedAt": started or now()}}
    status["lastState"] = {}
    return status


def pod_status(
    pod: Mapping[str, Any], failure: str, old: Mapping[str, Any], *, ready: bool = True
) -> dict[str, Any]:
    """The status a kubelet reports for ``pod`` once it runs (healthy or failing).

    ``ready=False``: the containers run but their readiness delay has not passed.
    """
    containers = _containers(pod)
    statuses = [_container_status(pod, c, failure, old) for c in containers]
    if not ready:
        for status in statuses:
            status["ready"] = False
    unready = [s["name"] for s in statuses if not s["ready"]]
    message = f"containers with unready status: [{' '.join(unready)}]"
    ready = not unready
    ip = pod_ip(pod)
    return {
        "phase": "Pending" if failure == IMAGE_PULL else "Running",
        **({"hostIP": _host_ip(pod)} if (pod.get("spec") or {}).get("nodeName") else {}),
        "conditions": [
            _pod_condition(old, "Initialized", True),
            _pod_condition(old, "Ready", ready, "ContainersNotReady", message),
            _pod_condition(old, "ContainersReady", ready, "ContainersNotReady", message),
            _pod_condition(old, "PodScheduled", True),
        ],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": old.get("startTime") or now(),
        "containerStatuses": statuses,
        "qosClass": "BestEffort",
    }


def pod_log(pod: Mapping[str, Any], container: str | None, tail_lines: int | None) -> str:
    """The simulated output of one container, as ``GET .../pods/NAME/log`` returns it.

    Errors follow the real server: 400 when a multi-container pod gets no container
    name, when the name is unknown, or when the container has not started yet.
    """
    meta = pod["metadata"]
    names = [str(c.get("name", "")) for c in _containers(pod)]
    if container is None:
        if len(names) != 1:
            raise ApiError(
                400,
                f"a container name must be specified for pod {meta['name']}, "
                f"choose one of: [{' '.join(names)}]",
            )
        container = names[0]
    if container not in names:
        raise ApiError(400, f"container {container} is not valid for pod {meta['name']}")
    spec = next(c for c in _containers(pod) if c.get("name") == container)
    state = next(
        (
            s.get("state") or {}
            for s in (pod.get("status") or {}).get("containerStatuses") or []
            if s.get("name") == container
        ),
        {},
    )
    waiting = state.get("waiting") or {}
    if not state or waiting.get("reason") in (IMAGE_PULL, "ContainerCreating"):
        pulling = waiting.get("reason") == IMAGE_PULL
        why = "trying and failing to pull image" if pulling else "ContainerCreating"
        raise ApiError(
            400,
            f'container "{container}" in pod "{meta["name"]}" is waiting to start: {why}',
        )
    lines = [f"[sandbox] container {container} started (image {spec.get('image', '')})"]
    extra = str(_annotations(pod).get(LOG_ANNOTATION, ""))
    lines.extend(line for line in extra.splitlines() if line)
    if waiting.get("reason") == CRASH_LOOP:
        lines.append(f"[sandbox] container {container} exited with code 1 (Error)")
    terminated = state.get("terminated") or {}
    if terminated:
        code, reason = terminated.get("exitCode", 0), terminated.get("reason", "")
        lines.append(f"[sandbox] container {container} exited with code {code} ({reason})")
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    return "".join(line + "\n" for line in lines)


def pod_log_of(pod: Mapping[str, Any], query: Mapping[str, str]) -> str:
    """:func:`pod_log` for a request's ``container`` and ``tailLines`` query parameters."""
    raw = query.get("tailLines")
    tail: int | None = None
    if raw is not None:
        try:
            tail = int(raw)
        except ValueError:
            raise ApiError(400, f'tailLines: Invalid value: "{raw}": must be an integer') from None
        if tail < 0:
            raise ApiError(400, "tailLines: Invalid value: must be greater than or equal to 0")
    return pod_log(pod, query.get("container"), tail)


@dataclass(frozen=True)
class PodTimes:
    """When a pod's stages begin, in seconds after it was bound to a node."""

    start: float  # containers running
    ready: float  # then Ready this much later (readiness delay of its images)
    run: float  # a run-to-completion container exits this long after it started


def run_to_completion(pod: Mapping[str, Any]) -> bool:
    """Pods of Jobs (``restartPolicy`` Never or OnFailure) end; others run until deleted."""
    return bool((pod.get("spec") or {}).get("restartPolicy", "Always") != "Always")


def images_of(pod: Mapping[str, Any]) -> list[str]:
    return [str(c.get("image", "")) for c in _containers(pod)]


def pod_status_at(
    pod: Mapping[str, Any], elapsed: float, times: PodTimes, failure: str, old: Mapping[str, Any]
) -> tuple[dict[str, Any], float | None]:
    """The status ``elapsed`` seconds after binding, and the seconds until it changes next.

    ``None`` means settled: nothing changes any more without a write to the pod.
    """
    if failure == IMAGE_PULL:
        return pod_status(pod, failure, old), None
    if elapsed < times.start:
        return _creating_status(pod, old), times.start - elapsed
    if run_to_completion(pod):
        end = times.start + times.run
        if elapsed < end:
            return pod_status(pod, "", old), end - elapsed
        return _terminated_status(pod, failure, old), None
    if failure:
        return pod_status(pod, failure, old), None
    ready_at = times.start + times.ready
    if elapsed < ready_at:
        return pod_status(pod, "", old, ready=False), ready_at - elapsed
    return pod_status(pod, "", old), None


def _base(pod: Mapping[str, Any], old: Mapping[str, Any], phase: str) -> dict[str, Any]:
    ip = pod_ip(pod)
    status: dict[str, Any] = {"phase": phase, "hostIP": _host_ip(pod)}
    status.update(podIP=ip, podIPs=[{"ip": ip}], startTime=old.get("startTime") or now())
    return status


def _host_ip(pod: Mapping[str, Any]) -> str:
    node = str((pod.get("spec") or {}).get("nodeName", ""))
    digest = hashlib.sha256(node.encode()).digest()
    return f"172.18.0.{digest[0] % 250 + 2}"


def _creating_status(pod: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """Bound to a node, images being pulled: Pending with containers ``ContainerCreating``."""
    names = [str(c.get("name", "")) for c in _containers(pod)]
    message = f"containers with unready status: [{' '.join(names)}]"
    status = _base(pod, old, "Pending")
    status.pop("podIP"), status.pop("podIPs")
    status["conditions"] = [
        _pod_condition(old, "Initialized", True),
        _pod_condition(old, "Ready", False, "ContainersNotReady", message),
        _pod_condition(old, "ContainersReady", False, "ContainersNotReady", message),
        _pod_condition(old, "PodScheduled", True),
    ]
    status["containerStatuses"] = [
        {
            "name": str(c.get("name", "")),
            "image": str(c.get("image", "")),
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {},
        }
        for c in _containers(pod)
    ]
    status["qosClass"] = "BestEffort"
    return status


def _terminated_status(
    pod: Mapping[str, Any], failure: str, old: Mapping[str, Any]
) -> dict[str, Any]:
    """A run-to-completion pod after its containers exited: Succeeded, or Failed with exit 1."""
    failed = bool(failure)
    meta = pod["metadata"]
    statuses = []
    for c in _containers(pod):
        name = str(c.get("name", ""))
        previous: Mapping[str, Any] = next(
            (s for s in old.get("containerStatuses") or [] if s.get("name") == name), {}
        )
        state = previous.get("state") or {}
        started = (state.get("running") or {}).get("startedAt") or (
            state.get("terminated") or {}
        ).get("startedAt")
        finished = (state.get("terminated") or {}).get("finishedAt") or now()
        statuses.append(
            {
                "name": name,
                "image": str(c.get("image", "")),
                "imageID": f"sandbox://{c.get('image', '')}",
                "containerID": f"sandbox://{meta.get('uid', '')}/{name}",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 1 if failed else 0,
                        "reason": "Error" if failed else "Completed",
                        "startedAt": started or finished,
                        "finishedAt": finished,
                        "containerID": f"sandbox://{meta.get('uid', '')}/{name}",
                    }
                },
                "lastState": {},
            }
        )
    status = _base(pod, old, "Failed" if failed else "Succeeded")
    status["conditions"] = [
        _pod_condition(old, "Initialized", True),
        _pod_condition(old, "Ready", False, "PodCompleted", ""),
        _pod_condition(old, "ContainersReady", False, "PodCompleted", ""),
        _pod_condition(old, "PodScheduled", True),
    ]
    status["containerStatuses"] = statuses
    status["qosClass"] = "BestEffort"
    return status


def is_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True (what controllers count as ready replicas)."""
    status = pod.get("status") or {}
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def running_containers(pod: Mapping[str, Any]) -> list[str]:
    """The names of the pod's containers whose state is ``running``."""
    return [
        str(s.get("name", ""))
        for s in (pod.get("status") or {}).get("containerStatuses") or []
        if "running" in (s.get("state") or {})
    ]


def stopping_status(old: Mapping[str, Any]) -> dict[str, Any]:
    """A terminating pod's status while its containers are being stopped: not Ready."""
    statuses = [{**s, "ready": False} for s in old.get("containerStatuses") or []]
    names = [str(s.get("name", "")) for s in statuses]
    message = f"containers with unready status: [{' '.join(names)}]"
    conditions = [
        _pod_condition(old, c["type"], False, "ContainersNotReady", message)
        if c.get("type") in ("Ready", "ContainersReady")
        else dict(c)
        for c in old.get("conditions") or []
    ]
    return {**old, "conditions": conditions, "containerStatuses": statuses}


def killed_status(old: Mapping[str, Any]) -> dict[str, Any]:
    """Its grace period over: every container killed (137), the pod ``Failed`` (the
    terminal phase a kubelet reports for a deleted pod since Kubernetes 1.27)."""
    stopped = stopping_status(old)
    statuses = []
    for status in stopped["containerStatuses"]:
        state = status.get("state") or {}
        if "running" in state:
            killed = {
                "exitCode": 137,
                "reason": "Error",
                "startedAt": state["running"].get("startedAt") or now(),
                "finishedAt": now(),
            }
            if status.get("containerID"):
                killed["containerID"] = status["containerID"]
            status = {**status, "started": False, "state": {"terminated": killed}}
        statuses.append(status)
    return {**stopped, "phase": "Failed", "containerStatuses": statuses}
