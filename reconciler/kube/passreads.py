"""One pass's reads of rollout workloads and their pods: one list per kind and namespace.

Observing a rollout reads the Deployment, its copy, their ReplicaSets and pods (or a
StatefulSet's or DaemonSet's pods and revisions). Done with requests per instance,
a pass over 200 rolling instances made about 2,000 requests one after another, and
each pass took tens of seconds (``bench/rollout.py``). ``PassReads`` is a
``KubeClient`` whose namespaced ``get`` and equality-selector ``list`` are served
from one list of the kind in that namespace, read on first use and kept for the
pass, so the cost of a pass grows with the namespaces, not the instances.

What the pass writes through it is folded in from the API server's answers (an
applied object as returned, a deleted one gone or marked terminating), so the
driver sees its own writes within the pass, as it would with fresh reads. The pass
drives instances of different namespaces on several threads: the lists are kept
under a lock, and a namespace's list is read once even when two threads want it. What
controllers do in reaction (new ReplicaSets, pods) shows at the next pass, which is
when the rollout looks again anyway: a rollout never relies on a controller having
acted within the same pass. Objects are kept as ``live.slim`` keeps them (pods'
and workloads' ``managedFields`` are most of their size, and rollouts never read
them). Create a new one for every pass.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from reconciler.kube.client import (
    JsonObject,
    KubeClient,
    Response,
    equality_selector,
    has_labels,
)
from reconciler.kube.live import slim
from reconciler.model.changeset import ObjectRef

_NAMESPACE_IN_PATH = re.compile(r"/namespaces/([^/]+)/")


class PassReads(KubeClient):
    """A client for one pass that lists each kind once per namespace (module docstring)."""

    def __init__(self, client: KubeClient) -> None:
        super().__init__(client._api, retry=client.retry, budget=client.budget)
        self.discovery = client.discovery  # one discovery cache for the process
        self._lists: dict[tuple[str, str, str], dict[str, JsonObject]] = {}
        self._lock = threading.RLock()  # held while ``_lists`` changes or is read
        self._listing: dict[tuple[str, str, str], threading.Lock] = {}
        self.lists_read = 0  # for tests and benchmarks: lists actually requested

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        keep: Callable[[JsonObject], JsonObject] | None = None,
    ) -> list[JsonObject]:
        pairs = equality_selector(label_selector)
        if not namespace or pairs is None:
            return super().list(
                api_version, kind, namespace=namespace, label_selector=label_selector, keep=keep
            )
        bucket = self._bucket(api_version, kind, namespace)
        with self._lock:
            found = [obj for obj in bucket.values() if has_labels(obj, pairs)]
        return [keep(obj) for obj in found] if keep is not None else found

    def get(self, ref: ObjectRef) -> JsonObject | None:
        if not ref.namespace or not self.resource(ref.api_version, ref.kind).namespaced:
            return super().get(ref)
        bucket = self._bucket(ref.api_version, ref.kind, ref.namespace)
        with self._lock:
            return bucket.get(ref.name)

    def request(
        self,
        method: str,
        path: str,
        *,
        subject: str,
        verb: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> Response:
        response = super().request(
            method,
            path,
            subject=subject,
            verb=verb,
            query=query,
            body=body,
            content_type=content_type,
        )
        if method != "GET" and not any(k == "dryRun" for k, _ in query):
            self._wrote(method, path, response.body)
        return response

    def refresh(self, refs: Iterable[ObjectRef]) -> None:
        """Read these objects again (they were written around the pass's reads).

        One GET each, instead of forgetting their namespace: a namespace holding
        many instances would otherwise be listed again after each one's write, and
        the pass would grow with the square of the instances per namespace.
        """
        for ref in refs:
            if self._holds(ref):
                self._put(ref, super().get(ref))
            # else never read this pass: the first read lists it fresh

    def known(self, objects: Iterable[tuple[ObjectRef, Mapping[str, Any] | None]]) -> None:
        """Take these objects as another client just wrote or read them (None: gone),
        without a request: what a rollout's final apply answered, which a GET a moment
        later would only repeat (a batch step read each workload twice this way)."""
        for ref, obj in objects:
            if self._holds(ref):
                self._put(ref, obj)

    def _holds(self, ref: ObjectRef) -> bool:
        with self._lock:
            return (ref.api_version, ref.kind, ref.namespace) in self._lists

    def _put(self, ref: ObjectRef, obj: Mapping[str, Any] | None) -> None:
        with self._lock:
            bucket = self._lists[(ref.api_version, ref.kind, ref.namespace)]
            if obj is None:
                bucket.pop(ref.name, None)
            else:
                bucket[ref.name] = slim(obj)

    def _bucket(self, api_version: str, kind: str, namespace: str) -> dict[str, JsonObject]:
        key = (api_version, kind, namespace)
        with self._lock:
            bucket = self._lists.get(key)
            if bucket is None:
                lock = self._listing.setdefault(key, threading.Lock())
        if bucket is not None:
            return bucket
        with lock:  # one list per namespace and kind, whichever thread asks first
            with self._lock:
                bucket = self._lists.get(key)
            if bucket is not None:
                return bucket
            listed = super().list(api_version, kind, namespace=namespace, keep=slim)
            with self._lock:
                self.lists_read += 1
                bucket = {str(o["metadata"]["name"]): o for o in listed}
                self._lists[key] = bucket
                return bucket

    def _wrote(self, method: str, path: str, answer: Mapping[str, Any]) -> None:
        """Fold a write's answer in; a delete answered with a Status drops the object."""
        with self._lock:
            meta = answer.get("metadata") or {}
            kind, api_version = answer.get("kind"), answer.get("apiVersion")
            name, namespace = meta.get("name"), meta.get("namespace")
            if kind and kind != "Status" and api_version and name and namespace:
                bucket = self._lists.get((str(api_version), str(kind), str(namespace)))
                if bucket is None:
                    return
                if method == "DELETE" and not meta.get("deletionTimestamp"):
                    bucket.pop(str(name), None)
                else:
                    bucket[str(name)] = slim(answer)
                return
            if method == "DELETE":  # answered with a Status: the object is gone
                for (api, kind, ns), bucket in self._lists.items():
                    name = path.rsplit("/", 1)[-1]
                    if name in bucket and self.resource(api, kind).path(ns, name) == path:
                        del bucket[name]
                        return
            found = _NAMESPACE_IN_PATH.search(path)
            for key in [k for k in self._lists if found is None or k[2] == found.group(1)]:
                del self._lists[key]
