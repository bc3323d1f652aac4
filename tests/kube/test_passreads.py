"""PassReads: one list per kind and namespace for a pass, its own writes folded in.

A label selector of equality terms is what the rollout driver sends; its meaning is
the API server's (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#equality-based-requirement),
so the cached filter must agree with the server's answer for the same selector.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from reconciler.kube import KubeClient
from reconciler.kube.client import JsonObject
from reconciler.kube.passreads import PassReads
from reconciler.model.changeset import ObjectRef
from tests.kube.conftest import Backend, configmap


def namespace(client: KubeClient, name: str) -> None:
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def test_one_list_per_kind_and_namespace_serves_gets_and_selectors(backend: Backend) -> None:
    ns, other = backend.namespace("reads"), backend.namespace("reads-other")
    for name in (ns, other):
        namespace(backend.client, name)
    for i, instance in enumerate(("a", "a", "b")):
        backend.client.apply(configmap(f"cm{i}", ns, instance))
    backend.client.apply(configmap("elsewhere", other, "a"))
    reads = PassReads(backend.client)
    selector = "app.kubernetes.io/instance=a"
    names = sorted(
        o["metadata"]["name"]
        for o in reads.list("v1", "ConfigMap", namespace=ns, label_selector=selector)
    )
    server = sorted(
        o["metadata"]["name"]
        for o in backend.client.list("v1", "ConfigMap", namespace=ns, label_selector=selector)
    )
    assert names == server == ["cm0", "cm1"]
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "cm2")) is not None
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "missing")) is None
    assert reads.lists_read == 1  # every read above came from one list
    assert reads.get(ObjectRef("v1", "ConfigMap", other, "elsewhere")) is not None
    assert reads.lists_read == 2  # another namespace is another list
    # a set-based selector is the server's to answer
    assert [
        o["metadata"]["name"]
        for o in reads.list(
            "v1", "ConfigMap", namespace=ns, label_selector="app.kubernetes.io/instance in (b)"
        )
    ] == ["cm2"]
    assert reads.lists_read == 2


def test_its_own_writes_are_seen_within_the_pass(backend: Backend) -> None:
    ns = backend.namespace("reads-writes")
    namespace(backend.client, ns)
    backend.client.apply(configmap("old", ns, "a"))
    reads = PassReads(backend.client)
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "new")) is None
    reads.apply(configmap("new", ns, "a", value="1"))
    seen = reads.get(ObjectRef("v1", "ConfigMap", ns, "new"))
    assert seen is not None and seen["data"] == {"value": "1"}
    assert reads.delete(ObjectRef("v1", "ConfigMap", ns, "old"))
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "old")) is None
    assert reads.lists_read == 1


def test_objects_written_around_it_are_read_again_without_listing_again(
    backend: Backend,
) -> None:
    """After an apply through another client, ``refresh`` reads just those objects (one
    GET each): listing the namespace again after every instance's write made a pass
    grow with the square of the instances sharing a namespace."""
    ns = backend.namespace("reads-refresh")
    namespace(backend.client, ns)
    backend.client.apply(configmap("mine", ns, "a", value="1"))
    backend.client.apply(configmap("gone", ns, "a"))
    backend.client.apply(configmap("theirs", ns, "b", value="1"))
    reads = PassReads(backend.client)
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "mine")) is not None
    backend.client.apply(configmap("mine", ns, "a", value="2"))  # around the pass's reads
    assert backend.client.delete(ObjectRef("v1", "ConfigMap", ns, "gone"))
    reads.refresh([ObjectRef("v1", "ConfigMap", ns, n) for n in ("mine", "gone")])
    seen = reads.get(ObjectRef("v1", "ConfigMap", ns, "mine"))
    assert seen is not None and seen["data"] == {"value": "2"}
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "gone")) is None
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "theirs")) is not None
    assert reads.lists_read == 1  # refreshed, never listed again
    reads.refresh([ObjectRef("v1", "ConfigMap", backend.namespace("never-read"), "x")])
    assert reads.lists_read == 1  # a namespace never read is read fresh when first used


def test_objects_another_client_wrote_are_taken_as_answered_without_a_request(
    backend: Backend,
) -> None:
    """``known`` folds in what a write through another client answered (a rollout's
    final apply): the pass sees it as a fresh GET would show it, with no GET sent."""
    ns = backend.namespace("reads-known")
    namespace(backend.client, ns)
    backend.client.apply(configmap("mine", ns, "a", value="1"))
    backend.client.apply(configmap("gone", ns, "a"))
    reads = PassReads(backend.client)
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "mine")) is not None
    answer = backend.client.apply(configmap("mine", ns, "a", value="2")).body
    assert backend.client.delete(ObjectRef("v1", "ConfigMap", ns, "gone"))
    before = backend.log()  # the sandbox's request log (None on a real cluster)
    reads.known(
        [
            (ObjectRef("v1", "ConfigMap", ns, "mine"), answer),
            (ObjectRef("v1", "ConfigMap", ns, "gone"), None),
            (ObjectRef("v1", "ConfigMap", backend.namespace("never-read"), "x"), answer),
        ]
    )
    after = backend.log()
    if before is not None and after is not None:
        assert after[len(before) :] == []  # nothing asked of the server
    seen = reads.get(ObjectRef("v1", "ConfigMap", ns, "mine"))
    assert seen is not None and seen["data"] == {"value": "2"}
    assert reads.get(ObjectRef("v1", "ConfigMap", ns, "gone")) is None
    assert reads.lists_read == 1  # a namespace never read is still read fresh when used


def test_threads_of_one_pass_share_one_list_per_namespace(backend: Backend) -> None:
    """The pass drives instances of different namespaces on several threads: a namespace
    wanted by many threads at once is still listed once, and every thread sees it."""
    ns = backend.namespace("reads-threads")
    namespace(backend.client, ns)
    for i in range(3):
        backend.client.apply(configmap(f"cm{i}", ns, "a"))
    reads = PassReads(backend.client)
    start = threading.Barrier(8)

    def read(i: int) -> JsonObject | None:
        start.wait()
        return reads.get(ObjectRef("v1", "ConfigMap", ns, f"cm{i % 3}"))

    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(read, range(8)))
    assert [o["metadata"]["name"] if o else None for o in found] == [f"cm{i % 3}" for i in range(8)]
    assert reads.lists_read == 1
