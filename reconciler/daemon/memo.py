"""Reuse last pass's verdict for an instance that nothing touched since: the no-op pass.

Most passes change nothing: a poll that sees the same commit, a drift check, a
commit to another app. Rendering every instance and comparing every object with
the cluster again then only proves what the last pass proved. An instance's
outcome is a function of its inputs (the catalog's model objects it is planned
from, the version its inventory says runs, the cluster's settings) and of its
live objects; when none of them changed, the full path would produce exactly
the same plan, result, health and record. So :class:`PassMemo` remembers, for
each instance whose last pass ended settled (Ready, every object unchanged and
healthy, nothing rolling, migrating, backing off or waiting), the inputs it was
planned from and the ``resourceVersion`` of each of its objects and of its
inventory as that pass's list showed them.

The inputs are compared by identity: the incremental catalog
(``catalog.incremental``) keeps the very same ``Instance`` and ``AppEntry``
objects for files a commit did not touch and builds new ones for files it did,
so "the same object" means "the same files". A commit to an app's files (a
channel moved, a version added) gives all its instances a new ``AppEntry``: an
instance is then resolved again (no rendering) and reused only if it selects the
same version, equal field by field to the one it was rendered from, with the same
image builds pinned (``builds.yaml``), so a channel move costs the instances it
moves. The live objects are compared by ``resourceVersion``, which the API server
changes on every write to an object, its status included, and never otherwise
(https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions).
An object someone edited (``kubectl edit``, a label changed), deleted, or took
our label off (it then leaves the pass's labelled list) is therefore seen as
changed, and the instance takes the full path: render, compare, apply. The
reuse never saves a request, only the work on the answers: every kind is still
listed once per pass, which is what shows the drift.

With the daemon's watch cache, a pass whose view of each kind the entries name is a
copy of the very store state the last pass's view was (``LiveState.generation``:
every change of a store, a watch event or our own write, takes a new generation),
and which neither pass changed itself, holds the very objects every entry was checked
against in the last pass: no object is compared one by one (the no-op pass of a
quiet cluster). Any change to one of those kinds compares every object, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from reconciler.daemon.plan import InstancePlan, ObjectKey
from reconciler.daemon.rendered import ref_key, refs_of
from reconciler.kube import HealthReport, InstanceResult, LiveState
from reconciler.kube.inventory import SHARED_SUFFIX, Inventory
from reconciler.kube.live import InventoryCache, Packed, version_of
from reconciler.model.catalog import AppEntry, Catalog, Cluster, Instance
from reconciler.model.changeset import Action, ChangeSet, ChangeSetEntry, ObjectRef
from reconciler.model.errors import KubeError
from reconciler.model.status import InstanceStatus, Phase
from reconciler.resolve import resolve_instance


@dataclass(frozen=True, slots=True)
class Reused:
    """Last pass's verdict on one instance, to stand for this pass's.

    ``plan`` carries no rendered objects (they are not kept between passes);
    ``objects`` are their references, in the plan's order: the check that no two
    instances render the same object still needs their identities (:attr:`keys`,
    made when asked: a 4-tuple per object kept for every settled instance cost more
    than the reference it is made of). ``result`` is handed back as it is by every
    pass that reuses the instance: its change-set entries (each object "unchanged")
    are made once, named with the inventory's references, where making them again
    on every pass was a fifth of a no-op pass's CPU for a few hundred bytes kept.
    """

    plan: InstancePlan
    objects: tuple[ObjectRef, ...]
    result: InstanceResult
    health: HealthReport
    built: InstanceStatus  # the record as built, before migration hooks saw it

    @property
    def keys(self) -> tuple[ObjectKey, ...]:
        return tuple(map(ref_key, self.objects))


@dataclass(frozen=True, slots=True)
class _Entry:
    instance: Instance
    app: AppEntry | None
    deployed: str
    reused: Reused
    final: InstanceStatus  # the record the pass returned (the daemon's ``previous``)
    refs: tuple[ObjectRef, ...]  # each object's and the inventory's ...
    # ... live object as the pass that settled it saw it: the watch cache's own packed
    # bytes, shared with it, whose ``resourceVersion`` is compared (a version string
    # per object of every settled instance was a copy of what the cache holds)
    seen: tuple[Packed, ...]
    # an inventory kept in its namespace's shared ConfigMap (``inventory: perNamespace``)
    # is not watched by that ConfigMap's resourceVersion, which every other instance of
    # the namespace moves, but by identity: the cache of inventories hands the next
    # pass the very object while its key's text is unchanged (``shared_entries``)
    inventory: Inventory | None = None


def _packed(live: LiveState, ref: ObjectRef) -> Packed | None:
    try:
        return live.packed(ref)
    except KubeError:
        return None


def _same(now: Packed | None, seen: Packed) -> bool:
    """Whether the live object ``now`` is still the version ``seen`` is (the API server
    changes ``resourceVersion`` on every write, and an object without one is never the
    same)."""
    if now is None:
        return False
    version = version_of(seen)
    return bool(version) and version_of(now) == version


class PassMemo:
    """The daemon's memory of settled instances across passes (see the module's doc).

    ``reused`` names the instances the last pass took from memory: what tests and
    the benchmark observe.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._context: tuple[Cluster, object] | None = None
        self.reused: frozenset[str] = frozenset()
        # inventories parsed by the last pass (``LiveState``'s ``inventory_cache``)
        self.inventories = InventoryCache()
        self._same_versions: dict[tuple[int, int], bool] = {}  # this pass's comparisons
        # this pass's live objects by kind, each looked up in the live view once
        self._kinds: dict[tuple[str, str], Mapping[ObjectRef, Packed]] = {}
        self._kinds_of: LiveState | None = None
        # the kinds of the entries' objects (a few), and the generation of each in the
        # view of the pass that last checked every entry, when that pass changed none
        self._entry_kinds: set[tuple[str, str]] = set()
        self._checked_at: dict[tuple[str, str], tuple[int, ...]] = {}
        self._unchanged = False  # this pass's view is the one of ``_checked_at``

    def begin(self, cluster: Cluster, settings: object) -> None:
        """Start a pass; different cluster settings or pass settings forget everything."""
        context = (cluster, settings)
        if self._context is not None and self._context != context:
            self._entries.clear()  # tuples compare items by identity first: cheap when same
            self._checked_at.clear()
        self._context = context
        self.reused = frozenset()
        self._same_versions.clear()

    def lookup(
        self,
        catalog: Catalog,
        instance: Instance,
        deployed: str | None,
        previous: InstanceStatus | None,
        live: LiveState,
    ) -> Reused | None:
        """Last pass's verdict when nothing it depended on changed, else None."""
        entry = self._entries.get(instance.name)
        if entry is None:
            return None
        if (
            entry.instance is not instance
            or entry.deployed != deployed
            or previous is None
            or entry.final is not previous
        ):
            return None
        if self._kinds_of is not live:  # another pass's view: its kinds are not this one's
            self._kinds.clear()
            self._kinds_of = live
            self._unchanged = self._as_checked(live)
        kinds = self._kinds
        for ref, seen in () if self._unchanged else zip(entry.refs, entry.seen, strict=True):
            bucket = kinds.get((ref.api_version, ref.kind))
            if bucket is None:
                try:
                    bucket = kinds[(ref.api_version, ref.kind)] = live.kind_of(ref)
                except KubeError:
                    return None
            now = bucket.get(ref)
            # the usual case first: the watch cache still holds the very bytes the pass
            # that settled it saw (``remember`` kept only objects with a version)
            if now is not seen and not _same(now, seen):
                return None
        if entry.inventory is not None and live.inventory(instance.name) is not entry.inventory:
            return None
        app = catalog.apps.get(instance.app)
        if entry.app is not app:
            # the app's files changed (a channel moved, a version was added): reused only
            # if this instance resolves as before to a version whose content is the same
            entry = self._same_plan(entry, app)
            if entry is None:
                return None
            self._entries[instance.name] = entry
        return entry.reused

    def _as_checked(self, live: LiveState) -> bool:
        """Whether ``live`` holds, for every kind of the entries, the very objects the
        last pass checked each entry against (see the module's doc).

        Every entry was checked by the last pass: reused (each object compared) or
        kept by it (``remember``, from its view); ``mark_reused`` noted that view's
        generations. The same generations now, unchanged by this pass so far, are the
        same objects, so each comparison would find what it found then.
        """
        if not self._checked_at:
            return False
        for key in self._entry_kinds:
            then = self._checked_at.get(key)
            if then is None:
                return False
            try:
                self._kinds[key] = live.kind_of(ObjectRef(key[0], key[1], "", ""))
            except KubeError:
                return False
            if live.generation(*key) != then:
                return False
        return True

    def _same_plan(self, entry: _Entry, app: AppEntry | None) -> _Entry | None:
        """``entry`` moved to ``app``'s objects when its plan there is the same, else None.

        The resolution is computed again (cheap, no rendering) and must be equal;
        the version it selects must equal the one the plan was rendered from, field by
        field (templates included), compared once per pair of versions in a pass.
        """
        if app is None:
            return None
        plan = entry.reused.plan
        resolution = resolve_instance(entry.instance, app, deployed=entry.deployed)
        if resolution != plan.resolution or plan.version is None:
            return None
        version = app.versions.get(resolution.next_version or "")
        if version is None:
            return None
        pair = (id(plan.version), id(version))
        if pair not in self._same_versions:  # both alive all pass: their ids stay theirs
            self._same_versions[pair] = version == plan.version
        if not self._same_versions[pair]:
            return None
        # the image builds builds.yaml pins for the version are rendered too (SPEC section 8)
        old = entry.app.builds_of(plan.version.key) if entry.app is not None else {}
        if dict(app.builds_of(version.key)) != dict(old):
            return None
        moved = replace(plan, resolution=resolution, version=version)
        return replace(entry, app=app, reused=replace(entry.reused, plan=moved))

    def mark_reused(self, names: Iterable[str], live: LiveState | None = None) -> None:
        """The pass is over: what it reused, for tests and the bench; its view let go.

        ``live`` (the pass's view): the generation of each kind of the entries in it,
        for the next pass (:meth:`_as_checked`). A kind the pass did not read has no
        entry any more (each entry's kinds were read to check or keep it): it is
        dropped. A kind without a generation (listed, or written by the pass) leaves
        the next pass comparing every object.
        """
        self.reused = frozenset(names)
        self._kinds.clear()
        self._kinds_of = None
        self._checked_at.clear()
        if live is None:
            return
        self._entry_kinds &= live.kinds()
        for key in self._entry_kinds:
            generation = live.generation(*key)
            if generation is None:
                self._checked_at.clear()
                return
            self._checked_at[key] = generation

    def remember(
        self,
        catalog: Catalog,
        plan: InstancePlan,
        deployed: str | None,
        result: InstanceResult,
        health: HealthReport | None,
        built: InstanceStatus,
        final: InstanceStatus,
        live: LiveState,
    ) -> None:
        """Keep ``plan``'s verdict if the pass ended settled for it, else forget it."""
        name = plan.name
        self._entries.pop(name, None)
        version = plan.version
        inventory = result.inventory
        if (
            version is None
            or not plan.ok
            or plan.instance.suspend
            or deployed != version.key
            or not result.ok
            or result.other_writer
            or inventory is None
            or health is None
            or not health.healthy
            or built.phase is not Phase.READY
            or built.rollout is not None
            or final.phase is not Phase.READY
            or not result.changes.entries
            or any(e.action is not Action.UNCHANGED for e in result.changes.entries)
        ):
            return
        refs = sorted(inventory.objects)
        entries = result.changes.entries
        if {e.ref for e in entries} != set(refs):
            return
        inventory_ref = live.inventory_ref(name, inventory.namespace)
        shared = inventory_ref.name.endswith(SHARED_SUFFIX)
        watched = tuple(refs) if shared else (*refs, inventory_ref)
        seen = []
        for ref in watched:
            packed = _packed(live, ref)
            if packed is None or not version_of(packed):
                return
            seen.append(packed)
            self._entry_kinds.add((ref.api_version, ref.kind))
        # what the entry keeps names each object with the inventory's references:
        # one reference and one name string per object, not one per copy the
        # pass made (rendering, health, the change set each made their own)
        same = {ref: ref for ref in refs}
        objects = tuple(same.get(ref, ref) for ref in refs_of(plan.objects))
        applied = tuple(same.get(e.ref, e.ref) for e in entries)
        if all(not e.message for e in entries):
            made = (ChangeSetEntry.for_ref(name, r, Action.UNCHANGED) for r in applied)
            result = replace(result, changes=ChangeSet(tuple(made)))
        # else a message to repeat (a warning): the entries are kept as they are
        health = HealthReport(
            tuple(replace(o, ref=same.get(o.ref, o.ref)) for o in health.objects),
            health.timed_out,
        )
        if built == final:
            built = final  # the usual case: no hook changed the record; keep one of them
        reused = Reused(replace(plan, objects=()), objects, result, health, built)
        self._entries[name] = _Entry(
            plan.instance,
            catalog.apps.get(plan.instance.app),
            deployed,
            reused,
            final,
            watched,
            tuple(seen),
            inventory if shared else None,
        )

    def still(self, name: str, final: InstanceStatus) -> None:
        """An instance reused this pass, with the record the pass returned for it."""
        entry = self._entries.get(name)
        if entry is not None:
            if entry.final is final:
                return  # a no-op pass hands back the very record: nothing to copy
            if final.phase is Phase.READY:
                self._entries[name] = replace(entry, final=final)
            else:
                del self._entries[name]

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)

    def forget_except(self, names: Iterable[str]) -> None:
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]


def reused_status(reused: Reused) -> InstanceStatus:
    """The record of a reused instance: the very one the pass that settled it built,
    whatever commit this pass is at.

    A reused instance is one no file it reads changed in, so its recorded state is
    the same, and ``sourceCommit`` names the commit at which that state was
    established (``status.records.prepare_record`` keeps the recorded one when nothing
    else changed). Handing back the very object, rather than a copy naming the new
    commit, lets the ledger know it settled by identity: a commit that touches no
    input of an instance (a README edit) then costs it what a pass at the same commit
    costs, where a copy per instance had the ledger prepare and compare each record
    again.
    """
    return reused.built
