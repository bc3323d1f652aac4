"""What a cluster does for every namespace: a ``default`` ServiceAccount, the root CA
ConfigMap, immortal system ones.

A real cluster's ServiceAccount controller creates a ServiceAccount named ``default`` in
every namespace and recreates it when someone deletes it
(https://kubernetes.io/docs/concepts/security/service-accounts/#default-service-accounts),
so manifests and tools (pods without ``serviceAccountName``, ``kubectl auth can-i``) may
rely on it. The root CA publisher does the same for the ConfigMap ``kube-root-ca.crt``
(the cluster's CA bundle, which projected service account volumes mount) and puts its
data back when someone changes it
(https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#service-account-token-volume-projection,
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#root-ca-configmap).
The ``NamespaceLifecycle`` admission plugin refuses to delete the system
namespaces ``default``, ``kube-system`` and ``kube-public`` with 403 Forbidden
(https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#namespacelifecycle).
:class:`NamespaceDefaults` listens to the store like the other sandbox controllers;
``gc.Lifecycle.delete`` calls :func:`check_deletable`.
"""

from __future__ import annotations

from typing import Any

from reconciler.sandbox.api import SandboxApi, WriteOptions
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.kinds import CONFIGMAPS, NAMESPACES, SERVICE_ACCOUNTS, Kind
from reconciler.sandbox.store import Resource, StoredEvent

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
DEFAULT_SERVICE_ACCOUNT = "default"
ROOT_CA = "kube-root-ca.crt"
# The sandbox serves plain HTTP; this stands for the CA a real cluster signs with.
SANDBOX_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhyZWNvbmNp\n"
    "bGVyLXNhbmRib3gtY2EwHhcNMjYwMTAxMDAwMDAwWhcNMzYwMTAxMDAwMDAwWjAj\n"
    "-----END CERTIFICATE-----\n"
)
_ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using "
    "internal endpoints such as the internal service IP or kubernetes.default.svc. "
    "No other usage is guaranteed across distributions of Kubernetes clusters."
)
_CONTROLLER_MANAGER = WriteOptions("kube-controller-manager")


def check_deletable(resource: Resource, name: str) -> None:
    """Refuse, as NamespaceLifecycle admission does, to delete a system namespace."""
    if resource == NAMESPACES and name in IMMORTAL_NAMESPACES:
        raise ApiError(
            403,
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            name=name,
            kind="namespaces",
        )


def root_ca_configmap(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ROOT_CA,
            "namespace": namespace,
            "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
        },
        "data": {"ca.crt": SANDBOX_CA},
    }


class NamespaceDefaults:
    """Keeps a ``default`` ServiceAccount and ``kube-root-ca.crt`` in every namespace that
    is not terminating."""

    def __init__(self, api: SandboxApi) -> None:
        self.api = api
        api.store.listeners.append(self._on_event)
        for ns in api.store.list(NAMESPACES):
            self._ensure(ns["metadata"]["name"])

    def _on_event(self, event: StoredEvent) -> None:
        name = event.obj["metadata"]["name"]
        if event.resource == NAMESPACES and event.type == "ADDED":
            self._ensure(name)
        elif event.type == "DELETED" and (event.resource, name) in (
            (SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT),
            (CONFIGMAPS, ROOT_CA),
        ):
            self._ensure(event.namespace)
        elif event.type == "MODIFIED" and (event.resource, name) == (CONFIGMAPS, ROOT_CA):
            self._restore(event.obj)

    def _ensure(self, namespace: str) -> None:
        ns = self.api.store.get(NAMESPACES, "", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        if self.api.store.get(SERVICE_ACCOUNTS, namespace, DEFAULT_SERVICE_ACCOUNT) is None:
            body = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace},
            }
            self.api.create(self._kind("serviceaccounts"), namespace, body, _CONTROLLER_MANAGER)
        if self.api.store.get(CONFIGMAPS, namespace, ROOT_CA) is None:
            body = root_ca_configmap(namespace)
            self.api.create(self._kind("configmaps"), namespace, body, _CONTROLLER_MANAGER)

    def _restore(self, stored: dict[str, Any]) -> None:
        """The publisher puts its data back when anyone else changed it."""
        if stored.get("data") == {"ca.crt": SANDBOX_CA} or stored["metadata"].get(
            "deletionTimestamp"
        ):
            return
        kind = self._kind("configmaps")
        body = {**stored, "data": {"ca.crt": SANDBOX_CA}}
        self.api.commit(kind, stored, body, _CONTROLLER_MANAGER)

    def _kind(self, plural: str) -> Kind:
        kind = self.api.kinds.lookup("", "v1", plural)
        assert kind is not None
        return kind
