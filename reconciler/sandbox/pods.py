"""The simulated kubelet's view of one Pod: its ``status`` and its container log.

A real kubelet reports a Pod's ``phase``, ``podIP``, per-container ``containerStatuses``
(``ready``, ``restartCount``, ``state`` waiting/running/terminated with reasons) and the
conditions ``PodScheduled``/``Initialized``/``ContainersReady``/``Ready``
(https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/ and
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus).
Health checks, ``kubectl describe`` and migration hooks read exactly those fields, so
the sandbox writes them with the same shape. Both functions are pure: a settled pod
computes the same status again (timestamps are carried over) and is not rewritten.

Failure injection: the annotation ``sandbox.reconciler.dev/fail`` on the pod (or its
template) set to ``ImagePullBackOff`` keeps the pod ``Pending`` with its containers
waiting on the image; ``CrashLoopBackOff`` or ``true``, or an image matching one of the
server's ``fail_images`` globs, gives a container that keeps crashing. The annotation
``sandbox.reconciler.dev/log`` adds its lines to every container's simulated output.

Not simulated: back-off timing (``restartCount`` stays at 1), probes, resource usage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
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


def pod_status(pod: Mapping[str, Any], failure: str, old: Mapping[str, Any]) -> dict[str, Any]:
    """The status a kubelet reports for ``pod`` once it settled (healthy or failing)."""
    containers = _containers(pod)
    statuses = [_container_status(pod, c, failure, old) for c in containers]
    unready = [s["name"] for s in statuses if not s["ready"]]
    message = f"containers with unready status: [{' '.join(unready)}]"
    ready = not unready
    ip = pod_ip(pod)
    return {
        "phase": "Pending" if failure == IMAGE_PULL else "Running",
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
    if not state or waiting.get("reason") == IMAGE_PULL:
        why = "trying and failing to pull image" if waiting else "ContainerCreating"
        raise ApiError(
            400,
            f'container "{container}" in pod "{meta["name"]}" is waiting to start: {why}',
        )
    lines = [f"[sandbox] container {container} started (image {spec.get('image', '')})"]
    extra = str(_annotations(pod).get(LOG_ANNOTATION, ""))
    lines.extend(line for line in extra.splitlines() if line)
    if waiting.get("reason") == CRASH_LOOP:
        lines.append(f"[sandbox] container {container} exited with code 1 (Error)")
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
