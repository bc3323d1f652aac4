"""The access reviews a client creates to ask what it may do: ``kubectl auth can-i``.

A ``SelfSubjectAccessReview`` asks "may I do this verb on this resource (or URL)?"
and a ``SelfSubjectRulesReview`` "what may I do in this namespace?"; the API server
answers in the object's ``status`` and stores nothing, so these kinds only accept
``create`` (https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access).

The sandbox authenticates every client as its administrator, a member of
``system:masters`` (the kubeconfig ``runner.py`` writes carries a placeholder token).
On a real cluster that group is authorized before RBAC is consulted, so every access
review is allowed. A rules review is answered by RBAC's rule resolver even for that
group: the rules of every ClusterRole bound (by a ClusterRoleBinding, or by a
RoleBinding in the namespace asked about) to the user or its groups, as stored, so a
narrowed binding narrows the answer. ``server.py`` answers a create of either kind
with :func:`review`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.apierrors import ApiError
from reconciler.sandbox.fielderrors import Cause, as_list, as_map, cause
from reconciler.sandbox.kinds import Kind

USER = "sandbox"
GROUPS = ("system:masters", "system:authenticated")
_RBAC = "rbac.authorization.k8s.io"


def review(api: SandboxApi, kind: Kind, body: Any) -> dict[str, Any]:
    """The answered review: the request's spec with the server's ``status``."""
    if not isinstance(body, Mapping):
        raise ApiError(400, "the request body must be a JSON object")
    spec = as_map(body.get("spec"))
    if kind.kind == "SelfSubjectAccessReview":
        _check_access_spec(kind, spec)
        status: dict[str, Any] = {"allowed": True}
    else:
        status = rules_status(api, str(spec.get("namespace") or ""))
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"creationTimestamp": None},
        "spec": dict(spec),
        "status": status,
    }


def _check_access_spec(kind: Kind, spec: Mapping[str, Any]) -> None:
    """``ValidateSelfSubjectAccessReviewSpec``: exactly one of the two attribute sets."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    causes: list[Cause] = []
    if resource is None and non_resource is None:
        why = (
            "Required value: exactly one of nonResourceAttributes or resourceAttributes "
            "must be specified"
        )
        causes.append(cause("FieldValueRequired", "spec.resourceAttributes", why))
    elif resource is not None and non_resource is not None:
        why = 'Invalid value: "null": cannot be specified in combination with resourceAttributes'
        causes.append(cause("FieldValueInvalid", "spec.nonResourceAttributes", why))
    if causes:
        listed = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise ApiError(
            422,
            f'{kind.kind}.{kind.group} "" is invalid: {listed}',
            group=kind.group,
            kind=kind.kind,
            causes=causes,
        )


def _bound_to_me(binding: Mapping[str, Any]) -> bool:
    for subject in as_list(binding.get("subjects")):
        subject = as_map(subject)
        if subject.get("kind") == "Group" and subject.get("name") in GROUPS:
            return True
        if subject.get("kind") == "User" and subject.get("name") == USER:
            return True
    return False


def _role_rules(api: SandboxApi, ref: Mapping[str, Any], namespace: str) -> list[Any]:
    if ref.get("kind") == "ClusterRole":
        role = api.store.view_one((_RBAC, "clusterroles"), "", str(ref.get("name")))
    else:
        role = api.store.view_one((_RBAC, "roles"), namespace, str(ref.get("name")))
    return as_list((role or {}).get("rules"))


def rules_status(api: SandboxApi, namespace: str) -> dict[str, Any]:
    """What RBAC's rule resolver lists for the sandbox's user in ``namespace``."""
    rules: list[Any] = []
    for binding in api.store.view((_RBAC, "clusterrolebindings"), None):
        if _bound_to_me(binding):
            rules += _role_rules(api, as_map(binding.get("roleRef")), "")
    if namespace:
        for binding in api.store.view((_RBAC, "rolebindings"), namespace):
            if _bound_to_me(binding):
                rules += _role_rules(api, as_map(binding.get("roleRef")), namespace)
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for rule in map(as_map, rules):
        verbs = list(as_list(rule.get("verbs")))
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": verbs, "nonResourceURLs": list(as_list(rule["nonResourceURLs"]))}
            )
            continue
        entry: dict[str, Any] = {"verbs": verbs}
        for field in ("apiGroups", "resources", "resourceNames"):
            if rule.get(field):
                entry[field] = list(as_list(rule[field]))
        resource_rules.append(entry)
    return {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
