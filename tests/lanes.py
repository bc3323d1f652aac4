"""The two lanes of the end-to-end tests: the sandbox always, a real cluster on request.

A scenario that takes a lane-parametrized fixture runs against a fresh sandbox and,
with ``RECONCILER_TEST_KUBECONFIG`` set, against that cluster as ``pytest -m
real_cluster`` (``make test-real``). What a real cluster needs of a test:

- unique namespaces and cluster names (the catalog's namespaces and cluster get a
  per-test suffix, see :func:`suffix_namespaces` and :func:`suffix_path`), so the
  scenarios can run side by side on one cluster (``pytest -n``);
- cleanup after, waiting until the namespaces are gone: a namespace is deleted
  asynchronously (it stays ``Terminating`` while its objects
  are deleted, https://kubernetes.io/docs/tasks/administer-cluster/namespaces/
  #deleting-a-namespace) and the next test must not meet its inventories;
- no sandbox internals: what a test observes it observes over the API, with a
  Kubernetes watch (:class:`Watched`), so "at every write" invariants hold from
  the same watch events on either lane;
- failures that fail in both: a missing image tag (``ImagePullBackOff`` on a real
  node) is the sandbox's ``fail_images`` pattern :data:`FAIL_IMAGES` too.

Each scenario therefore has two variants, ``[sandbox]`` and ``[real]``. ``make test``
runs the lane (against a standalone sandbox) beside the unit suite, which it gives
``--lane-runs-elsewhere``: the unit suite then leaves out each ``[sandbox]`` variant
whose ``[real]`` twin the lane runs (:func:`lane_twins`), so a scenario runs once. A
scenario only the sandbox can play (it needs the sandbox's simulated timing, its
StorageClasses...) says so statically, ``@pytest.mark.sandbox_lane_only("why")``: its
``[real]`` variant is skipped with that reason (:func:`skip_sandbox_lane_only`) and its
``[sandbox]`` variant always runs. A ``[real]`` variant that skips at run time in the
lane without the marker fails (:func:`unmarked_lane_skip`): its ``[sandbox]`` twin was
left out, so it would have run nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError

REAL_ENV = "RECONCILER_TEST_KUBECONFIG"
LANES = ["sandbox", pytest.param("real", marks=pytest.mark.real_cluster)]
# Where the lane's scenarios live (the folders whose fixtures take LANES). `make test-real`
# collects only these: collecting the whole suite to deselect all but a thirtieth of it
# cost each of its workers 4 s of CPU. tests/conftest.py refuses a real_cluster test
# outside them, so none can be left out of the lane unnoticed.
LANE_DIRS = ("tests/daemon", "tests/kube", "tests/migrations", "tests/rollout")

# A tag no registry has: a real kubelet cannot pull it (ErrImagePull, then
# ImagePullBackOff: https://kubernetes.io/docs/concepts/containers/images/
# #imagepullbackoff), and the sandbox is told to fail it (a standalone sandbox that
# stands in for a real cluster needs ``--fail-image '*:*-does-not-exist'``).
MISSING_TAG = "0.0.0-does-not-exist"
# A manifest digest no registry has, for a pinned build that cannot be pulled
# (``repo:<long tag>@<digest>``, SPEC section 8): the same ErrImagePull on a real kubelet.
MISSING_DIGEST = "sha256:deadbeef" + "0" * 56
FAIL_IMAGES = ("*:*-does-not-exist", f"*@{MISSING_DIGEST}")


# The marker of a scenario only the sandbox can play, with the reason (pyproject's markers)
SANDBOX_LANE_ONLY = "sandbox_lane_only"
# The pytest option `make test` gives the unit suite (registered in tests/conftest.py)
LANE_RUNS_ELSEWHERE = "--lane-runs-elsewhere"


def _lane(item: pytest.Item) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    """``(lane, scenario, other parameters)`` of a lane variant, None for any other test.

    A lane variant is a test whose parameter of a ``LANES`` fixture is ``"sandbox"`` or
    ``"real"`` (the ``[real]`` one carries the ``real_cluster`` mark); the key of its
    scenario is everything else: the test's parent, its name and its other parameters.
    """
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    real = item.get_closest_marker("real_cluster") is not None
    want = "real" if real else "sandbox"
    lanes = [name for name, value in callspec.params.items() if value == want]
    if len(lanes) != 1:
        return None
    parent = item.parent.nodeid if item.parent is not None else ""
    others = tuple(
        sorted((name, repr(value)) for name, value in callspec.params.items() if name != lanes[0])
    )
    return want, f"{parent}::{getattr(item, 'originalname', item.name)}::{lanes[0]}", others


def lane_twins(items: Iterable[pytest.Item]) -> list[pytest.Item]:
    """The ``[sandbox]`` variants among ``items`` whose ``[real]`` twin is among them too
    and runs in the lane (not marked ``sandbox_lane_only``): what the unit suite leaves
    to the lane under ``--lane-runs-elsewhere``. A ``[sandbox]`` variant collected
    without its twin (``pytest path::test[sandbox]``) is no one's twin: it stays."""
    items = list(items)
    in_lane = set()
    for item in items:
        lane = _lane(item)
        if lane and lane[0] == "real" and not item.get_closest_marker(SANDBOX_LANE_ONLY):
            in_lane.add(lane[1:])
    twins = []
    for item in items:
        lane = _lane(item)
        if lane and lane[0] == "sandbox" and lane[1:] in in_lane:
            twins.append(item)
    return twins


def sandbox_lane_only_reason(item: pytest.Item) -> str | None:
    """The reason ``item`` gives in its ``sandbox_lane_only`` mark, None when unmarked;
    a mark without one is refused (the lane's skip prints it)."""
    mark = item.get_closest_marker(SANDBOX_LANE_ONLY)
    if mark is None:
        return None
    reason = mark.args[0] if mark.args else mark.kwargs.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{SANDBOX_LANE_ONLY} needs a reason: "
            f"what of the sandbox the scenario needs, which a real cluster lacks"
        )
    return reason


def skip_sandbox_lane_only(items: Iterable[pytest.Item]) -> None:
    """Skip the ``[real]`` variant of each scenario marked ``sandbox_lane_only``, with its
    reason, before any lane fixture connects to the cluster."""
    for item in items:
        reason = sandbox_lane_only_reason(item)
        if reason is not None and item.get_closest_marker("real_cluster"):
            item.add_marker(pytest.mark.skip(reason=reason))


# Set on a test whose [real] variant skips for what the cluster holds (skip_cluster_holds)
_CLUSTER_HOLDS = pytest.StashKey[str]()


def skip_cluster_holds(item: pytest.Item, reason: str) -> None:
    """Skip ``item``'s ``[real]`` variant for what this cluster holds of someone else's,
    which the scenario would touch (a real reconciler's ledger): a skip the lane lets
    through. Not a scenario only the sandbox can play: on a cluster without it
    (``make test``'s standalone sandbox) it runs."""
    item.stash[_CLUSTER_HOLDS] = reason
    pytest.skip(reason)


def unmarked_lane_skip(item: pytest.Item, call: pytest.CallInfo[None]) -> str | None:
    """Why the skip of ``item`` in ``call`` fails the test, None when it may skip.

    In the lane (``RECONCILER_TEST_KUBECONFIG`` set), a ``[real]`` variant that skips at
    run time without the ``sandbox_lane_only`` mark (and not by :func:`skip_cluster_holds`)
    is a scenario that runs nowhere in ``make test``: its ``[sandbox]`` twin was left out
    of the unit suite because the lane runs this one.
    """
    if not os.environ.get(REAL_ENV) or call.excinfo is None:
        return None
    if not item.get_closest_marker("real_cluster") or item.get_closest_marker(SANDBOX_LANE_ONLY):
        return None
    if not call.excinfo.errisinstance(pytest.skip.Exception) or _CLUSTER_HOLDS in item.stash:
        return None
    return (
        f"{item.nodeid} skipped in the real_cluster lane ({call.excinfo.value.msg}), "
        f"unmarked: `make test` runs this scenario only here (its unit suite leaves the "
        f"[sandbox] twin to the lane, {LANE_RUNS_ELSEWHERE}), so it would run nowhere. "
        f"If only the sandbox can play this scenario, mark it "
        f'@pytest.mark.{SANDBOX_LANE_ONLY}("{call.excinfo.value.msg}"): its [real] variant '
        f"is then skipped and its [sandbox] variant kept in the unit suite."
    )


def real_kubeconfig() -> Path:
    """The real cluster's kubeconfig; skips the test at once when the lane is off."""
    path = os.environ.get(REAL_ENV)
    if not path:
        pytest.skip(f"{REAL_ENV} is not set")
    return Path(path).expanduser()


def new_suffix() -> str:
    return "-" + uuid.uuid4().hex[:6]


_INSTANCE = re.compile(r"^clusters/[^/]+/instances/[^/]+\.ya?ml$")
_CLUSTER = re.compile(r"^clusters/[^/]+/cluster\.ya?ml$")
_CLUSTER_DIR = re.compile(r"^clusters/([^/]+)/")
_NAMESPACE_LINE = re.compile(r"^(namespace:[ \t]*)([\"']?)([^\"'\s#]+)([\"']?)", re.MULTILINE)


def suffix_path(rel: str, suffix: str) -> str:
    """Catalog path ``rel`` with its cluster's directory ending in ``suffix``.

    ``clusters/prod/instances/web.yaml`` becomes ``clusters/prod-abc123/instances/web.yaml``:
    each test on a shared cluster reconciles a cluster name of its own, so one test's
    inventories (found cluster-wide by the cluster's name) are never another's, which
    would count them as instances removed from its catalog and prune them. Scenarios
    then run side by side (``pytest -n``) against one cluster.
    """
    if not suffix:
        return rel
    return _CLUSTER_DIR.sub(lambda m: f"clusters/{m[1]}{suffix}/", rel, count=1)


def suffix_namespaces(rel: str, text: str, suffix: str) -> str:
    """``text`` of catalog file ``rel`` with every name it gives ending in ``suffix``.

    An instance file's ``namespace:``, and a cluster file's ``name`` (its directory's,
    see :func:`suffix_path`) and ``allowedNamespaces`` (globs too: ``team-*`` becomes
    ``team-*-abc123``, which still matches ``team-api-abc123``); other files are
    returned as they are.
    """
    if not suffix:
        return text
    if _INSTANCE.match(rel):
        return _NAMESPACE_LINE.sub(lambda m: f"{m[1]}{m[2]}{m[3]}{suffix}{m[4]}", text, count=1)
    if _CLUSTER.match(rel):
        doc = yaml.safe_load(text)
        if isinstance(doc, dict):
            if isinstance(doc.get("name"), str):
                doc["name"] = f"{doc['name']}{suffix}"
            if isinstance(doc.get("allowedNamespaces"), list):
                doc["allowedNamespaces"] = [f"{ns}{suffix}" for ns in doc["allowedNamespaces"]]
            return yaml.safe_dump(doc, sort_keys=False)
    return text


def namespaces_ending(client: KubeClient, suffix: str) -> list[str]:
    """The cluster's namespaces that end in a test's ``suffix``: the ones it made."""
    assert suffix, "without a suffix every namespace would be the test's"
    names = (str(ns["metadata"]["name"]) for ns in client.list("v1", "Namespace"))
    return [name for name in names if name.endswith(suffix)]


def delete_namespaces(client: KubeClient, names: Iterable[str], *, wait: float = 120.0) -> None:
    """Delete ``names`` and wait until they are gone (best effort on a shared cluster)."""
    refs = [ObjectRef("v1", "Namespace", "", name) for name in sorted(set(names))]
    for ref in refs:
        with contextlib.suppress(KubeError):
            client.delete(ref)
    deadline = time.monotonic() + wait
    for ref in refs:
        while time.monotonic() < deadline:
            try:
                if client.get(ref) is None:
                    break
            except KubeError:
                break
            time.sleep(0.05)  # a condition: looked at often, bounded by `wait`


@dataclass(frozen=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


_LISTS: dict[str, Callable[[k8s_client.ApiClient], Callable[..., Any]]] = {
    "Pod": lambda api: k8s_client.CoreV1Api(api).list_namespaced_pod,
    "Job": lambda api: k8s_client.BatchV1Api(api).list_namespaced_job,
}


class Watched:
    """One kind's objects in one namespace, kept current by a Kubernetes watch.

    A list gives the starting state and its resourceVersion, a watch from there
    every change after it, in order (the API server sends each write to a watcher,
    not samples: https://kubernetes.io/docs/reference/using-api/api-concepts/
    #efficient-detection-of-changes). Each event is handed to ``on_event`` on the
    watch's thread as it arrives, with the objects as they are after it, like a
    controller's informer. :meth:`caught_up` waits until the copy equals a fresh
    list, so a test reads it only after the watch has delivered what happened.
    """

    def __init__(
        self,
        kubeconfig: Path,
        kind: str,
        namespace: str,
        on_event: Callable[[Event, Mapping[str, dict[str, Any]]], None] | None = None,
    ) -> None:
        self.kind, self.namespace = kind, namespace
        self._api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        self._list = _LISTS[kind](self._api)
        self._on_event = on_event
        self._lock = threading.Lock()
        self._watch = k8s_watch.Watch()
        self._stopped = False
        self.error: BaseException | None = None
        self.objects: dict[str, dict[str, Any]] = {}
        raw = self._list(namespace, _preload_content=False)
        listed = json.loads(raw.data)  # no models: the API's own dicts, as the engine sees them
        for item in listed.get("items") or []:
            self.objects[item["metadata"]["name"]] = item
        self._rv = str(listed["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._run, name=f"watch-{kind}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped:
            try:
                for event in self._watch.stream(
                    self._list,
                    self.namespace,
                    resource_version=self._rv,
                    timeout_seconds=30,
                    deserialize=False,
                ):
                    self._seen(event)
                    if self._stopped:
                        return
            except BaseException as e:  # reported by caught_up(), never swallowed
                if not self._stopped:
                    self.error = e
                return

    def _seen(self, event: dict[str, Any]) -> None:
        obj = event.get("raw_object") or event["object"]
        if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
            return  # a BOOKMARK carries no object
        with self._lock:
            name = str(obj["metadata"]["name"])
            if event["type"] == "DELETED":
                self.objects.pop(name, None)
            else:
                self.objects[name] = obj
            self._rv = str(obj["metadata"]["resourceVersion"])
            if self._on_event is not None:
                self._on_event(Event(event["type"], obj), self.objects)

    def caught_up(self, timeout: float = 60.0) -> dict[str, dict[str, Any]]:
        """Wait until the watched copy equals a fresh list (names and resourceVersions).

        Events arrive in resourceVersion order, so once every listed object is
        there at its listed version and nothing else is, every change up to the
        list has been delivered.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.error is not None:
                raise AssertionError(f"the {self.kind} watch failed: {self.error!r}")
            raw = self._list(self.namespace, _preload_content=False)
            want = {
                i["metadata"]["name"]: i["metadata"]["resourceVersion"]
                for i in json.loads(raw.data).get("items") or []
            }
            with self._lock:
                have = {n: o["metadata"]["resourceVersion"] for n, o in self.objects.items()}
                if have == want:
                    return dict(self.objects)
            if time.monotonic() > deadline:
                raise AssertionError(f"the {self.kind} watch lags: {have} != {want}")
            time.sleep(0.02)

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()
        self._thread.join(timeout=1)
        self._api.close()


@contextlib.contextmanager
def watching(
    kubeconfig: Path,
    kind: str,
    namespace: str,
    on_event: Callable[[Event, Mapping[str, dict[str, Any]]], None] | None = None,
) -> Iterator[Watched]:
    """A :class:`Watched` for the ``with`` block; ``on_event`` sees each event and the
    objects as they are right after it."""
    watched = Watched(kubeconfig, kind, namespace, on_event)
    try:
        yield watched
    finally:
        watched.stop()
