"""The inventory: what each instance applied, recorded in the cluster itself.

By default one ConfigMap per instance, ``reconciler-inventory-<instance>`` in the
instance's namespace. With ``inventory: perNamespace`` in ``cluster.yaml``, one
ConfigMap per namespace and cluster, ``reconciler-inventory-<cluster>.shared``,
holds the inventories of all the cluster's instances there, one key per instance
(:func:`shared_entries`), so a pass that installs or upgrades many instances of a
namespace writes their inventories with one request (``kube.inventory_writes``)
instead of one each. Readers take both layouts, so a cluster can switch either way.
An inventory holds the applied object references with the
fingerprint of each manifest, the app version that is deployed, the catalog
commit that last changed the inventory (``sourceCommit``; not the latest commit,
which would rewrite every inventory on every commit, see
``reconciler.kube.apply._stamped``) and a checksum of the whole set. Prune
deletes only what an inventory lists; apply skips objects whose fingerprint and
live state both match; and :func:`read_deployed_versions` feeds
``plan_cluster(..., deployed=...)`` so downgrade guards and upgrade paths know
what runs now.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any

from reconciler.model.catalog import INVENTORY_PER_INSTANCE, INVENTORY_PER_NAMESPACE
from reconciler.model.changeset import ObjectRef
from reconciler.model.rollout import release_key

if TYPE_CHECKING:
    from reconciler.kube.client import KubeClient
    from reconciler.model.catalog import Instance

MANAGED_BY = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGER_NAME = "reconciler"
INVENTORY_LABEL = "reconciler.dev/inventory"
CLUSTER_LABEL = "reconciler.dev/cluster"
NAME_PREFIX = "reconciler-inventory-"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER_NAME}"
# The shared layout's ConfigMap is ``reconciler-inventory-<cluster>.shared``: an
# instance's own is ``reconciler-inventory-<instance>``, and an instance name is a
# DNS label (no dot), so the two never name the same object.
SHARED_SUFFIX = ".shared"
# What one shared ConfigMap may hold (its keys and values, in bytes). The API server
# refuses a ConfigMap over 1 MiB; past this bound an instance's inventory is written
# to its own ConfigMap instead (``kube.inventory_writes``), which readers take as well.
SHARED_BYTES = 512 * 1024
PER_INSTANCE = INVENTORY_PER_INSTANCE
PER_NAMESPACE = INVENTORY_PER_NAMESPACE


@dataclass(frozen=True, slots=True)
class Inventory:
    """What one instance has applied; ``objects`` maps each ref to its manifest fingerprint."""

    cluster: str
    instance: str
    namespace: str
    app: str = ""
    version: str = ""
    source_commit: str = ""
    objects: Mapping[ObjectRef, str] = field(default_factory=dict)
    # Who applied it: the daemon's source ("<repo> (<branch>)"). A different writer
    # found here means another reconciler writes this cluster (see ``apply_instance``).
    writer: str = ""
    # The pinned image builds the deployed version runs (image -> "tag@digest", SPEC
    # section 8): a rebuild keeps the version, so this is how the next pass, or a
    # restarted daemon, knows which build runs and renders it to roll back to.
    images: Mapping[str, str] = field(default_factory=dict)
    # The limits file its objects were applied under ("clusters/prod/cluster.yaml"),
    # "" when the cluster had none: the cluster's own memory that limits existed, so a
    # commit that deletes them is refused even after a restart (SPEC section 3b).
    limits: str = ""

    @property
    def release(self) -> str:
        """The version and builds as one key (``reconciler.model.rollout.release_key``)."""
        return release_key(self.version, self.images) if self.version else ""

    @property
    def refs(self) -> frozenset[ObjectRef]:
        return frozenset(self.objects)

    @property
    def checksum(self) -> str:
        """A hash of the applied set, so two inventories compare with one string."""
        text = json.dumps(self._object_list(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _object_list(self) -> list[dict[str, str]]:
        return [
            {**ref.to_dict(), "fingerprint": fp}
            for ref, fp in sorted(self.objects.items(), key=lambda kv: kv[0])
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "instance": self.instance,
            "namespace": self.namespace,
            "app": self.app,
            "version": self.version,
            "sourceCommit": self.source_commit,
            "checksum": self.checksum,
            "objects": self._object_list(),
            **({"writer": self.writer} if self.writer else {}),
            **({"images": dict(sorted(self.images.items()))} if self.images else {}),
            **({"limits": self.limits} if self.limits else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Inventory:
        objects = {
            ObjectRef.from_dict(o): str(o.get("fingerprint", ""))
            for o in data.get("objects") or ()
            if isinstance(o, Mapping)
        }
        return cls(
            cluster=str(data.get("cluster", "")),
            instance=str(data.get("instance", "")),
            namespace=str(data.get("namespace", "")),
            app=str(data.get("app", "")),
            version=str(data.get("version", "")),
            source_commit=str(data.get("sourceCommit", "")),
            objects=objects,
            writer=str(data.get("writer", "")),
            images=_images(data.get("images")),
            limits=str(data.get("limits", "")),
        )

    def same_as(self, other: Inventory | None) -> bool:
        return other is not None and self.to_dict() == other.to_dict()


def _images(value: object) -> dict[str, str]:
    """Builds from an inventory; anything that is not a string map reads as none."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def _images_json(text: object) -> dict[str, str]:
    try:
        return _images(json.loads(text)) if isinstance(text, str) else {}
    except ValueError:
        return {}


def inventory_name(instance: str) -> str:
    return NAME_PREFIX + instance


def shared_name(cluster: str) -> str:
    """The ConfigMap holding the ``perNamespace`` inventories of ``cluster`` in a namespace."""
    return NAME_PREFIX + cluster + SHARED_SUFFIX


def shared_ref(cluster: str, namespace: str) -> ObjectRef:
    """The shared inventory ConfigMap of ``cluster`` in ``namespace``."""
    return ObjectRef("v1", "ConfigMap", namespace, shared_name(cluster))


def shared_labels(cluster: str) -> dict[str, str]:
    """The labels of a shared inventory ConfigMap: ours, an inventory, of ``cluster``."""
    return {MANAGED_BY: MANAGER_NAME, INVENTORY_LABEL: "true", CLUSTER_LABEL: cluster}


def entry_text(inv: Inventory) -> str:
    """An inventory as one key of a shared ConfigMap: compact JSON of ``to_dict``."""
    return json.dumps(inv.to_dict(), sort_keys=True, separators=(",", ":"))


def entry_size(instance: str, text: str) -> int:
    """What one key takes of ``SHARED_BYTES`` (the API server counts keys and values)."""
    return len(instance) + len(text.encode())


def shared_configmap(cluster: str, namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    """A new shared inventory ConfigMap holding ``data`` (instance -> ``entry_text``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": shared_name(cluster),
            "namespace": namespace,
            "labels": shared_labels(cluster),
        },
        "data": dict(data),
    }


def shared_entries(
    cm: Mapping[str, Any], known: Mapping[str, Inventory] | None = None
) -> tuple[Inventory, ...]:
    """The inventories a shared ConfigMap holds; () when it is not one of ours.

    ``known`` (entry text -> the inventory read from it before, in this ConfigMap):
    a key whose text did not change is that very inventory, not parsed again. When
    one instance of a namespace changes, the others' inventories stay the objects the
    daemon holds, which its memo of settled instances compares by identity.

    A key counts only when the entry names the same instance, the cluster the
    ConfigMap is named and labelled for, and a readable object list: like an
    instance's own ConfigMap, an entry is trusted only under its own name, and the
    namespace is the ConfigMap's, whatever the entry says. An unreadable key is left
    out (its instance reads as not installed: nothing of it is pruned on its word).
    """
    meta = cm.get("metadata") or {}
    labels = meta.get("labels") or {}
    cluster = labels.get(CLUSTER_LABEL, "")
    if labels.get(INVENTORY_LABEL) != "true" or meta.get("name") != shared_name(str(cluster)):
        return ()
    namespace = str(meta.get("namespace", ""))
    found: list[Inventory] = []
    for key, text in sorted((cm.get("data") or {}).items()):
        seen = known.get(text) if known is not None and isinstance(text, str) else None
        if seen is not None and seen.instance == key and seen.namespace == namespace:
            found.append(seen)
            continue
        try:
            entry = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        if (
            not isinstance(entry, dict)
            or entry.get("instance") != key
            or entry.get("cluster") != cluster
            or not isinstance(entry.get("objects", []), list)
        ):
            continue
        found.append(Inventory.from_dict({**entry, "namespace": namespace}))
    return tuple(found)


def inventories_of(cm: Mapping[str, Any]) -> tuple[Inventory, ...]:
    """The inventories one ConfigMap holds, in either layout."""
    name = str((cm.get("metadata") or {}).get("name", ""))
    if name.endswith(SHARED_SUFFIX):
        return shared_entries(cm)
    inv = from_configmap(cm)
    return (inv,) if inv is not None else ()


def _objects_text(objects: list[dict[str, str]]) -> str:
    """``json.dumps(objects, indent=1, sort_keys=True)``, character for character.

    With ``indent`` set, ``json.dumps`` encodes in Python: each call builds nested
    closures that refer to each other, a reference cycle only the cyclic garbage
    collector frees, and the daemon holds that collector off while a pass runs
    (``daemon.loop``). Writing one inventory per instance, a first install then kept
    about 2 KiB per instance of dead encoders until the pass ended. The entries are
    flat maps of strings, so the text is built here with the C string encoder.
    """
    if not objects:
        return "[]"
    if not all(isinstance(k, str) and isinstance(v, str) for o in objects for k, v in o.items()):
        return json.dumps(objects, indent=1, sort_keys=True)
    quote = encode_basestring_ascii
    entries = [
        "{\n" + ",\n".join(f"  {quote(k)}: {quote(o[k])}" for k in sorted(o)) + "\n }"
        if o
        else "{}"
        for o in objects
    ]
    return "[\n " + ",\n ".join(entries) + "\n]"


def to_configmap(inv: Inventory) -> dict[str, Any]:
    """The ConfigMap that stores an inventory; flat keys so ``kubectl get -o yaml`` reads well."""
    data = inv.to_dict()
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": inventory_name(inv.instance),
            "namespace": inv.namespace,
            "labels": {
                MANAGED_BY: MANAGER_NAME,
                INSTANCE_LABEL: inv.instance,
                INVENTORY_LABEL: "true",
                CLUSTER_LABEL: inv.cluster,
            },
        },
        "data": {
            "cluster": inv.cluster,
            "instance": inv.instance,
            "app": inv.app,
            "version": inv.version,
            "sourceCommit": inv.source_commit,
            "checksum": data["checksum"],
            "objects": _objects_text(data["objects"]),
            **({"writer": inv.writer} if inv.writer else {}),
            **({"images": json.dumps(dict(inv.images), sort_keys=True)} if inv.images else {}),
            **({"limits": inv.limits} if inv.limits else {}),
        },
    }


def from_configmap(cm: Mapping[str, Any]) -> Inventory | None:
    """Read an inventory ConfigMap; None when it is not one of ours or is unreadable."""
    meta = cm.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(INVENTORY_LABEL) != "true":
        return None
    data = cm.get("data") or {}
    try:
        objects = json.loads(data.get("objects") or "[]")
    except ValueError:
        return None
    if not isinstance(objects, list):
        return None
    instance = data.get("instance", labels.get(INSTANCE_LABEL, ""))
    if meta.get("name") != inventory_name(str(instance)):
        return None  # an inventory is trusted only under its own name
    return Inventory.from_dict(
        {
            "cluster": data.get("cluster", labels.get(CLUSTER_LABEL, "")),
            "instance": instance,
            "namespace": meta.get("namespace", ""),
            "app": data.get("app", ""),
            "version": data.get("version", ""),
            "sourceCommit": data.get("sourceCommit", ""),
            "objects": objects,
            "writer": data.get("writer", ""),
            "images": _images_json(data.get("images")),
            "limits": data.get("limits", ""),
        }
    )


def inventory_selector(cluster: str) -> str:
    return f"{INVENTORY_LABEL}=true,{CLUSTER_LABEL}={cluster}"


def trusted_inventories(
    configmaps: Iterable[Mapping[str, Any]],
    cluster: str,
    namespaces: Mapping[str, str] | None = None,
) -> dict[str, Inventory]:
    """The inventories of ``cluster`` by instance name, counting only those we can trust.

    An inventory counts only under its own name (``reconciler-inventory-<instance>``,
    or its own key of the namespace's shared ConfigMap) and, for an instance whose
    namespace Git names (``namespaces``), only in that namespace: a look-alike
    ConfigMap elsewhere cannot claim another instance's deployed version or objects.
    For instances Git no longer has, two candidates in different namespaces are
    ambiguous and neither is trusted (so nothing is pruned on their word).
    """
    return trusted((inv for cm in configmaps for inv in inventories_of(cm)), cluster, namespaces)


def trusted(
    inventories: Iterable[Inventory | None],
    cluster: str,
    namespaces: Mapping[str, str] | None = None,
) -> dict[str, Inventory]:
    """``trusted_inventories`` of ConfigMaps already read (``from_configmap``)."""
    namespaces = namespaces or {}
    found: dict[str, Inventory] = {}
    ambiguous: set[str] = set()
    for inv in inventories:
        if inv is None or inv.cluster != cluster:
            continue
        expected = namespaces.get(inv.instance)
        if expected and inv.namespace != expected:
            continue
        if inv.instance in found and found[inv.instance].namespace != inv.namespace:
            ambiguous.add(inv.instance)
        found[inv.instance] = inv
    for name in ambiguous:
        found.pop(name, None)
    return found


def read_inventories(
    client: KubeClient, cluster: str, namespaces: Mapping[str, str] | None = None
) -> dict[str, Inventory]:
    """Every trusted inventory of ``cluster`` by instance name, with one list request."""
    configmaps = client.list("v1", "ConfigMap", label_selector=inventory_selector(cluster))
    return trusted_inventories(configmaps, cluster, namespaces)


def read_deployed_versions(
    client: KubeClient, cluster_name: str, instances: Iterable[str | Instance]
) -> dict[str, str]:
    """Instance name -> deployed app version, for the given instances that have one."""
    given = list(instances)
    wanted = {i if isinstance(i, str) else i.name for i in given}
    namespaces = {i.name: i.namespace for i in given if not isinstance(i, str)}
    return {
        name: inv.version
        for name, inv in read_inventories(client, cluster_name, namespaces).items()
        if name in wanted and inv.version
    }
