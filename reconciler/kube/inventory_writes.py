"""The ``perNamespace`` inventory layout's writes: one request per namespace and pass.

With ``inventory: perNamespace`` in ``cluster.yaml``, the inventories of a cluster's
instances in one namespace are keys of one ConfigMap,
``reconciler-inventory-<cluster>.shared`` (``kube.inventory``). Applying an instance
stages its key here (``stage``) instead of writing a ConfigMap of its own, and
whoever made the pass's ``LiveState`` sends what was staged once its applies and
removals are done (``LiveState.flush_inventories``): one JSON merge patch per
namespace, naming only the keys that changed (a ``null`` removes one), so a pass
that installs or upgrades 200 instances of a namespace writes their inventories
with one request, not 200. A merge patch changes only the keys it names, on the
object as the API server holds it, so two writers of one namespace (the replicas of
``--shards``) never undo each other's keys; the first writer of a namespace creates
the ConfigMap (``POST``), and a second that loses that race patches it.

The order keeps a crash safe, as the per-instance layout's is: an instance's
objects are applied before its inventory is written, which is what the next pass
reads back (objects of ours that no inventory lists are adopted by their labels,
``kube.apply``), and when an inventory moves (the cluster switched layouts, or its
namespace changed) its new place is written before the old one is removed, so a
crash between them leaves it in both places, which readers accept
(``LiveState._trusted``).

Bounds: a shared ConfigMap holds at most ``SHARED_BYTES`` (512 KiB of keys and
values; the API server refuses a ConfigMap over 1 MiB). An inventory that would
take it past that is written to the instance's own ConfigMap instead, as in the
``perInstance`` layout, and says so in the log: nothing is refused.

A flush that fails (the API server refuses the patch, or cannot be reached) fails
the instances whose keys it carried (``ApplyFailed``, naming the ConfigMap): their
objects were applied, and the next pass writes their inventories again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler.kube.client import FIELD_MANAGER, MERGE_PATCH
from reconciler.kube.errors import KubeApiError, NotFoundError
from reconciler.kube.inventory import (
    SHARED_BYTES,
    Inventory,
    entry_size,
    entry_text,
    shared_configmap,
    shared_labels,
    shared_ref,
)
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

if TYPE_CHECKING:
    from reconciler.kube.live import LiveState

log = logging.getLogger(__name__)


class InventoryWrites:
    """One pass's staged shared-inventory writes, by namespace; thread safe."""

    def __init__(self, live: LiveState) -> None:
        self._live = live
        self._lock = threading.Lock()
        # namespace -> instance -> its entry (None: remove the key)
        self._staged: dict[str, dict[str, str | None]] = {}
        # namespace -> instance -> (its entry text, the inventory staged): for the
        # daemon's cache, which keeps the very inventories the pass holds
        self._inventories: dict[str, dict[str, tuple[str, Inventory]]] = {}
        # namespace -> the instances' own ConfigMaps to delete once it is written
        self._moved: dict[str, list[ObjectRef]] = {}
        # namespace -> bytes its shared ConfigMap holds, with what is staged
        self._sizes: dict[str, int] = {}
        self._entries: dict[str, dict[str, int]] = {}

    def stage(self, inventory: Inventory, replaces: tuple[ObjectRef, ...] = ()) -> bool:
        """Stage ``inventory`` as its namespace's key; False when it does not fit.

        ``replaces``: the instance's own ConfigMaps (per-instance layout) to delete
        once the shared one holds it.
        """
        namespace, instance = inventory.namespace, inventory.instance
        text = entry_text(inventory)
        size = entry_size(instance, text)
        with self._lock:
            total = self._total_with(namespace, instance, size)
            if total > SHARED_BYTES:
                log.warning(
                    "inventory of %s/%s written to its own ConfigMap: the shared one "
                    "would hold %d bytes, over its bound of %d",
                    namespace,
                    instance,
                    total,
                    SHARED_BYTES,
                )
                return False
            self._entries[namespace][instance] = size
            self._sizes[namespace] = total
            self._staged.setdefault(namespace, {})[instance] = text
            self._inventories.setdefault(namespace, {})[instance] = (text, inventory)
            self._moved.setdefault(namespace, []).extend(replaces)
        return True

    def fits(self, inventory: Inventory) -> bool:
        """Would ``inventory`` fit in its namespace's shared ConfigMap (``SHARED_BYTES``)?"""
        namespace, instance = inventory.namespace, inventory.instance
        size = entry_size(instance, entry_text(inventory))
        with self._lock:
            return self._total_with(namespace, instance, size) <= SHARED_BYTES

    def stage_removal(self, namespace: str, instance: str) -> None:
        """Remove ``instance``'s key from ``namespace``'s shared ConfigMap at the flush."""
        with self._lock:
            sizes = self._entry_sizes(namespace)
            self._sizes[namespace] -= sizes.pop(instance, 0)
            self._staged.setdefault(namespace, {})[instance] = None
            self._inventories.get(namespace, {}).pop(instance, None)

    def _total_with(self, namespace: str, instance: str, size: int) -> int:
        """Bytes the namespace's shared ConfigMap would hold with ``instance``'s key at
        ``size`` (held under ``_lock``)."""
        sizes = self._entry_sizes(namespace)
        return self._sizes[namespace] - sizes.get(instance, 0) + size

    def _entry_sizes(self, namespace: str) -> dict[str, int]:
        """Bytes per key of the namespace's shared ConfigMap as read (and staged since)."""
        sizes = self._entries.get(namespace)
        if sizes is None:
            cm = self._live.get(shared_ref(self._live.cluster, namespace)) or {}
            data = cm.get("data") or {}
            sizes = {str(k): entry_size(str(k), str(v)) for k, v in data.items()}
            self._entries[namespace] = sizes
            self._sizes[namespace] = sum(sizes.values())
        return sizes

    def flush(self) -> dict[str, str]:
        """Send each namespace's staged keys in one request; instance -> error on failure."""
        with self._lock:
            staged, self._staged = self._staged, {}
            inventories, self._inventories = self._inventories, {}
            moved, self._moved = self._moved, {}
            self._entries.clear()
            self._sizes.clear()
        failed: dict[str, str] = {}
        for namespace in sorted(staged):
            changes = staged[namespace]
            try:
                cm = self._write(namespace, changes)
            except KubeError as e:
                failed.update({instance: str(e) for instance in changes})
                continue
            if cm is not None:
                self._live.remember(cm)
                self._live.record_shared(cm, dict(inventories.get(namespace, {}).values()))
                if not cm.get("data"):
                    self._delete_empty(cm)
            for ref in moved.get(namespace, ()):
                try:
                    self._live.client.delete(ref)
                except KubeError as e:  # a second copy stays; the next write removes it
                    log.warning("%s: not deleted after its move to the shared one: %s", ref, e)
                else:
                    self._live.forget(ref)
        return failed

    def _write(self, namespace: str, changes: Mapping[str, str | None]) -> dict[str, Any] | None:
        """One merge patch of the namespace's keys, or a POST when the ConfigMap is missing.

        Whether it exists is the pass's view (one list of ConfigMaps); if that is out
        of date, a 404 or a 409 says so and the other request is sent. None when
        there was nothing to write: only removals, and no ConfigMap.
        """
        client = self._live.client
        cluster = self._live.cluster
        ref = shared_ref(cluster, namespace)
        patch = {"metadata": {"labels": shared_labels(cluster)}, "data": dict(changes)}
        present = {k: v for k, v in changes.items() if v is not None}
        query = [("fieldManager", FIELD_MANAGER), ("fieldValidation", "Strict")]
        exists = self._live.get(ref) is not None
        for _ in range(3):
            if exists:
                try:
                    return client.request(
                        "PATCH",
                        client.object_path(ref),
                        subject=str(ref),
                        verb="write inventories",
                        query=query,
                        body=patch,
                        content_type=MERGE_PATCH,
                    ).body
                except NotFoundError:
                    exists = False
            if not present:
                return None
            try:
                return client.request(
                    "POST",
                    client.resource("v1", "ConfigMap").path(namespace),
                    subject=str(ref),
                    verb="create inventories",
                    query=query,
                    body=shared_configmap(cluster, namespace, present),
                ).body
            except KubeApiError as e:
                if e.status != 409:  # 409: another writer created it a moment ago
                    raise
                exists = True
        raise KubeApiError(
            f"{ref}: write inventories failed (Conflict): deleted and created again while "
            "this pass wrote it",
            status=409,
            api_reason="Conflict",
        )

    def _delete_empty(self, cm: Mapping[str, Any]) -> None:
        """Delete a shared ConfigMap left with no key, unless someone wrote it since."""
        meta = cm.get("metadata") or {}
        ref = shared_ref(self._live.cluster, str(meta.get("namespace", "")))
        try:
            self._live.client.delete(ref, resource_version=str(meta.get("resourceVersion", "")))
        except KubeError as e:  # a writer added a key since: it stays, with that key
            log.info("%s: left in place: %s", ref, e)
            return
        self._live.forget(ref)
