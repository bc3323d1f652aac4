"""What a cluster does for every namespace: a ``default`` ServiceAccount, immortal system ones.

A real cluster's ServiceAccount controller creates a ServiceAccount named ``default`` in
every namespace and recreates it when someone deletes it
(https://kubernetes.io/docs/concepts/security/service-accounts/#default-service-accounts),
so manifests and tools (pods without ``serviceAccountName``, ``kubectl auth can-i``) may
rely on it. The ``NamespaceLifecycle`` admission plugin refuses to delete the system
namespaces ``default``, ``kube-system`` and ``kube-public`` with 403 Forbidden
(https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#namespacelifecycle).
:class:`DefaultServiceAccounts` listens to the store like the other sandbox controllers;
``gc.Lifecycle.delete`` calls :func:`check_deletable`.
"""

from __future__ import annotations

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.store import Resource, StoredEvent

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
DEFAULT_SERVICE_ACCOUNT = "default"

_NAMESPACES: Resource = ("", "namespaces")
_SERVICE_ACCOUNTS: Resource = ("", "serviceaccounts")


def check_deletable(resource: Resource, name: str) -> None:
    """Refuse, as NamespaceLifecycle admission does, to delete a system namespace."""
    if resource == _NAMESPACES and name in IMMORTAL_NAMESPACES:
        raise ApiError(
            403,
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            name=name,
            kind="namespaces",
        )


class DefaultServiceAccounts:
    """Keeps a ``default`` ServiceAccount in every namespace that is not terminating."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api
        api.store.listeners.append(self._on_event)
        for ns in api.store.list(_NAMESPACES):
            self._ensure(ns["metadata"]["name"])

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource == _NAMESPACES and event.type == "ADDED":
            self._ensure(event.obj["metadata"]["name"])
        elif (
            event.resource == _SERVICE_ACCOUNTS
            and event.type == "DELETED"
            and event.obj["metadata"]["name"] == DEFAULT_SERVICE_ACCOUNT
        ):
            self._ensure(event.namespace)

    def _ensure(self, namespace: str) -> None:
        ns = self.api.store.get(_NAMESPACES, "", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        if self.api.store.get(_SERVICE_ACCOUNTS, namespace, DEFAULT_SERVICE_ACCOUNT) is not None:
            return
        kind = self.api.kinds.lookup("", "v1", "serviceaccounts")
        assert kind is not None
        body = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace},
        }
        self.api.create(kind, namespace, body, WriteOptions("kube-controller-manager"))
