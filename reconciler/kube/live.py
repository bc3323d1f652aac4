"""One pass's view of the cluster: one list per kind, not one GET per object.

``LiveState`` lists each kind the pass touches once, across all namespaces,
filtered to objects labelled ``app.kubernetes.io/managed-by=reconciler``, and
answers per-object lookups from that. An object that is absent here either
does not exist or is not ours; apply then simply applies it (the API answers
201 or 200), diff and prune read it with a GET. Apply and prune keep the view
current as they write, so a daemon may share one ``LiveState`` per pass across
all instances of a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from reconciler.kube.inventory import MANAGED_SELECTOR, Inventory, trusted_inventories
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient

JsonObject = dict[str, Any]


class LiveState:
    """Lazily filled, per-pass cache of our live objects, namespaces and inventories."""

    def __init__(
        self, client: KubeClient, cluster: str, namespaces: Mapping[str, str] | None = None
    ) -> None:
        """``namespaces`` (instance -> namespace in Git) says where each inventory must be."""
        self.client = client
        self.cluster = cluster
        self.expected_namespaces: Mapping[str, str] = namespaces or {}
        self._objects: dict[tuple[str, str], dict[ObjectRef, JsonObject]] = {}
        self._namespaces: set[str] | None = None
        self._seen_namespaces: set[str] = set()  # namespaces holding a listed object
        self._inventories: dict[str, Inventory] | None = None

    def get(self, ref: ObjectRef) -> JsonObject | None:
        """Our live object for ``ref`` (listing its kind on first use), else None."""
        key = (ref.api_version, ref.kind)
        if key not in self._objects:
            items = self.client.list(ref.api_version, ref.kind, label_selector=MANAGED_SELECTOR)
            self._objects[key] = {ObjectRef.of(o): o for o in items}
            self._seen_namespaces.update(r.namespace for r in self._objects[key])
        return self._objects[key].get(ref)

    def fetch(self, ref: ObjectRef) -> JsonObject | None:
        """The object whatever its labels: from the cache, else one GET."""
        return self.get(ref) or self.client.get(ref)

    def remember(self, obj: Mapping[str, Any]) -> None:
        """Record an object the pass just wrote (as the API returned it)."""
        ref = ObjectRef.of(obj)
        bucket = self._objects.get((ref.api_version, ref.kind))
        if bucket is not None:
            bucket[ref] = dict(obj)
        if ref.kind == "Namespace" and self._namespaces is not None:
            self._namespaces.add(ref.name)

    def forget(self, ref: ObjectRef) -> None:
        bucket = self._objects.get((ref.api_version, ref.kind))
        if bucket is not None:
            bucket.pop(ref, None)

    def namespace_exists(self, name: str) -> bool:
        """True if ``name`` exists; a listed object living in it proves so without a request."""
        if name in self._seen_namespaces:
            return True
        return name in self.namespaces()

    def prefetch(self, refs: Iterable[ObjectRef]) -> None:
        """List the kinds of ``refs`` now; kinds the server does not serve yet are skipped."""
        for ref in refs:
            try:
                self.get(ref)
            except KubeError:
                continue

    def namespaces(self) -> set[str]:
        """Every namespace in the cluster (ours or not): one unfiltered list."""
        if self._namespaces is None:
            self._namespaces = {
                str((ns.get("metadata") or {}).get("name", ""))
                for ns in self.client.list("v1", "Namespace")
            }
        return self._namespaces

    def inventories(self) -> dict[str, Inventory]:
        """The cluster's inventories by instance name: one list request per pass."""
        if self._inventories is None:
            # inventories carry our managed-by label: reuse the ConfigMap list
            self.get(ObjectRef("v1", "ConfigMap", "", ""))
            self._inventories = trusted_inventories(
                self._objects[("v1", "ConfigMap")].values(), self.cluster, self.expected_namespaces
            )
        return self._inventories

    def deployed_versions(self, instances: Iterable[str]) -> dict[str, str]:
        """Instance name -> deployed version, as ``read_deployed_versions`` (no extra request)."""
        wanted = set(instances)
        return {n: i.version for n, i in self.inventories().items() if n in wanted and i.version}

    def inventory(self, instance: str) -> Inventory | None:
        return self.inventories().get(instance)

    def record_inventory(self, inv: Inventory) -> None:
        self.inventories()[inv.instance] = inv

    def drop_inventory(self, instance: str) -> None:
        self.inventories().pop(instance, None)
