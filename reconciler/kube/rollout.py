"""Moving StatefulSet replicas batch by batch with the native partition (SPEC section 4).

The first piece of the rollout driver (docs/ROLLOUTS.md): ``ScaleBatch`` on a
StatefulSet sets ``spec.updateStrategy.rollingUpdate.partition = replicas -
target``, so pods with an ordinal >= the partition run the update revision
(https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#partitions).

The partition is written by server-side apply under its own field manager,
``reconciler-rollout``, and only that field: the engine's ``reconciler`` manager
never lists it unless the manifest does, so re-applying the plain render (drift
correction) leaves the rollout's partition alone; ``release_partition`` gives the
field back when the rollout ends. The value is absolute, so repeating a call
after a restart changes nothing.
"""

from __future__ import annotations

from reconciler.kube.client import APPLY_PATCH, KubeClient
from reconciler.model.changeset import ObjectRef

ROLLOUT_FIELD_MANAGER = "reconciler-rollout"


def partition_for(replicas: int, target: int) -> int:
    """The partition that lets exactly ``target`` of ``replicas`` pods run the new revision."""
    if replicas < 0 or not 0 <= target <= replicas:
        raise ValueError(f"target {target} must be between 0 and replicas {replicas}")
    return replicas - target


def set_partition(client: KubeClient, namespace: str, name: str, partition: int) -> None:
    """Own and set the StatefulSet's partition (forcing: the rollout owns it now)."""
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    _apply_strategy(client, namespace, name, {"partition": partition})


def release_partition(client: KubeClient, namespace: str, name: str) -> None:
    """Stop owning the partition: apply an empty strategy under the rollout's manager.

    Server-side apply removes a field its manager no longer applies when no other
    manager owns it, so the StatefulSet goes back to the render's partition (when the
    render has none, the API server's default 0: every pod on the update revision).
    """
    _apply_strategy(client, namespace, name, None)


def _apply_strategy(
    client: KubeClient, namespace: str, name: str, rolling: dict[str, int] | None
) -> None:
    ref = ObjectRef("apps/v1", "StatefulSet", namespace, name)
    spec: dict[str, object] = {}
    if rolling is not None:
        spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    client.request(
        "PATCH",
        client.object_path(ref),
        subject=str(ref),
        verb="set partition" if rolling is not None else "release partition",
        query=[("fieldManager", ROLLOUT_FIELD_MANAGER), ("force", "true")],
        body=body,
        content_type=APPLY_PATCH,
    )
