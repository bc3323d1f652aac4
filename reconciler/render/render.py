"""Turn an instance and a chosen app version into Kubernetes objects.

Pure computation over values the catalog loader already parsed: no file or
network I/O, so ``reconciler render`` works offline and the daemon can render
every instance on every pass cheaply. Problems are returned, never raised, and
name the instance file and line (unknown or missing parameters, values of the
wrong type, namespaces the cluster does not allow).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.builds import ImageBuild, pinned_images
from reconciler.model.catalog import AppVersion, Catalog, Cluster, Instance, Template
from reconciler.model.names import is_dns_label, is_dns_subdomain
from reconciler.model.placeholders import TOKEN, is_single_placeholder, parse_placeholder
from reconciler.model.problems import Problem, Severity
from reconciler.model.sizes import json_size, text_size
from reconciler.render.kinds import custom_cluster_scoped, is_cluster_scoped, kind_rank
from reconciler.render.strings import stringify_string_fields

MANAGED_BY = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
NAME_LABEL = "app.kubernetes.io/name"
VERSION_LABEL = "app.kubernetes.io/version"
MANAGER = "reconciler"

RESERVED_NAME_PREFIXES = ("reconciler-inventory-", "reconciler-migrations-", "reconciler-rollout-")
RESERVED_LABEL_PREFIX = "reconciler.dev/"
# Objects the control plane itself creates and keeps on every cluster. A manifest that
# rendered one would adopt it into an instance's inventory, and uninstalling the
# instance would then delete it (a deleted ClusterRole "view" stays gone until the API
# server restarts; kube-root-ca.crt is put back at once, a fight on every pass).
# https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings
# https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/
# https://kubernetes.io/docs/concepts/services-networking/service/ (default/kubernetes)
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
DEFAULT_RBAC_NAMES = frozenset({"cluster-admin", "admin", "edit", "view"})
RBAC_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})
# the label the EndpointSlice controller puts on the slices it keeps for a Service
SLICE_MANAGER = "endpointslice.kubernetes.io/managed-by"
SLICE_CONTROLLER = "endpointslice-controller.k8s.io"
# RBAC objects only need to be valid path segments ("system:aggregate-to-view")
PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})

# Bounds on what rendering builds, checked before it builds it: a 1 MB parameter used
# 1,000 times in one manifest is a 2 MB catalog and a 1 GB object, and encoding that
# for the plan took the whole process down (SIGSEGV in the JSON encoder) for every
# instance of the cluster. An object over the bound is a validation error on its
# manifest and instance; that instance keeps its last good state, the others go on.
MAX_OBJECT_BYTES = 1536 * 1024
"""The largest rendered object, as JSON: etcd's default request limit (1.5 MiB), past
which the API server refuses an object anyway."""
MAX_INSTANCE_BYTES = 16 * 1024 * 1024
"""All rendered objects of one instance together, as JSON: a pass keeps every
instance's rendered objects until it ends, so one instance may not take the memory
of thousands (a typical instance renders a few KiB; ten objects at the object bound
still fit)."""


@dataclass(frozen=True)
class RenderResult:
    objects: tuple[dict[str, Any], ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(p.is_error for p in self.problems)


def object_ref(obj: Mapping[str, Any]) -> str:
    """``Kind/namespace/name`` (or ``Kind/name``), the way errors and logs name objects."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return (
        f"{obj.get('kind')}/{ns}/{meta.get('name')}"
        if ns
        else f"{obj.get('kind')}/{meta.get('name')}"
    )


def render_instance(
    catalog: Catalog,
    instance: Instance,
    version: AppVersion,
    *,
    builds: Mapping[str, ImageBuild] | None = None,
) -> RenderResult:
    """Render ``version``'s manifests for ``instance``; objects come in apply order.

    ``${images.NAME}`` is ``repo:<long tag>@<digest>`` for every image the app's
    ``builds.yaml`` pins for this version (SPEC section 8), else the reference the
    version names. ``builds`` replaces the catalog's pins: a rollout renders the build
    that runs (``from``) after ``builds.yaml`` has moved on.
    """
    problems: list[Problem] = []
    params = _parameters(instance, version, problems)
    if any(p.is_error for p in problems):
        return RenderResult((), tuple(problems))
    if builds is None:
        builds = catalog.builds_of(version)
    scope = _scope(instance, version, params, pinned_images(version.images, builds))
    objects = []
    sizes = _Sizes(scope)
    for template in version.templates:
        problem = sizes.admit(template, instance)
        if problem is not None:
            return RenderResult((), (*problems, problem))
        objects.append(_rendered(template, scope))
    problems.extend(_check_names(instance, version, objects))
    if any(p.is_error for p in problems):
        # a name that is not a DNS name could escape its namespace in a request path,
        # or slip past an allowedNamespaces pattern: never hand it to the engine
        return RenderResult((), tuple(problems))
    cluster_scoped = custom_cluster_scoped(objects)
    labels = {
        MANAGED_BY: MANAGER,
        INSTANCE_LABEL: instance.name,
        NAME_LABEL: version.app,
        VERSION_LABEL: version.key,
    }
    for obj in objects:
        _finish(obj, instance, labels, cluster_scoped)
        stringify_string_fields(obj)
    objects.sort(key=lambda o: kind_rank(str(o.get("kind"))))
    cluster = catalog.clusters.get(instance.cluster)
    if cluster is not None:
        problems.extend(_check_limits(instance, cluster.cluster, objects, cluster_scoped))
    problems.extend(_check_duplicates(instance, objects))
    return RenderResult(tuple(objects), tuple(problems))


def _check_names(
    instance: Instance, version: AppVersion, objects: list[dict[str, Any]]
) -> list[Problem]:
    """Names and namespaces must be DNS names before any pattern match or request path."""
    problems = []
    for template, obj in zip(version.templates, objects, strict=True):
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            continue
        kind = str(obj.get("kind"))
        where = f"{template.file} (document {template.index + 1}, rendered for {instance.name})"
        name, namespace = meta.get("name"), meta.get("namespace")
        message = _name_problem(kind, name) or _reserved_problem(kind, meta)
        if message:
            problems.append(Problem(template.file, None, Severity.ERROR, f"{where}: {message}"))
        if namespace not in (None, "") and not is_dns_label(namespace):
            problems.append(
                Problem(
                    template.file,
                    None,
                    Severity.ERROR,
                    f"{where}: {kind} {name}: metadata.namespace {json.dumps(namespace)} "
                    "is not a valid namespace name (a DNS-1123 label: lowercase letters, "
                    'digits and "-", at most 63 characters)',
                )
            )
    return problems


def _reserved_problem(kind: str, meta: Mapping[str, Any]) -> str | None:
    """reconciler's own bookkeeping names and labels cannot come from a manifest.

    Otherwise one instance could ship a ConfigMap that looks like another
    instance's inventory (claiming it runs 99.0.0 and freezing it in
    DowngradeBlocked), or label objects into another instance's prune set.
    """
    name = str(meta.get("name"))
    labels = meta.get("labels")
    maintained = _cluster_maintained(
        kind,
        name,
        str(meta.get("namespace") or ""),
        labels if isinstance(labels, Mapping) else {},
    )
    if maintained:
        return (
            f'{kind} "{name}": {maintained} keeps this object on every cluster; a manifest '
            "must not render it (the instance would own it and delete it on uninstall)"
        )
    for prefix in RESERVED_NAME_PREFIXES:
        if name.startswith(prefix):
            return f'{kind} "{name}": names starting with "{prefix}" are reserved for reconciler'
    for key in labels if isinstance(labels, Mapping) else ():
        if str(key).startswith(RESERVED_LABEL_PREFIX):
            return (
                f'{kind} "{name}": label "{key}" is reserved for reconciler '
                f'(labels under "{RESERVED_LABEL_PREFIX}" cannot be set by a manifest)'
            )
    return None


def _cluster_maintained(
    kind: str, name: str, namespace: str, labels: Mapping[str, Any] | None = None
) -> str:
    """Who keeps ``kind``/``name`` on every cluster ("" when nobody does)."""
    if kind == "Namespace" and name in SYSTEM_NAMESPACES:
        return "the API server"
    if kind == "ConfigMap" and name == "kube-root-ca.crt":
        return "the root CA publisher"
    if (
        kind in ("Service", "Endpoints", "EndpointSlice")
        and name == "kubernetes"
        and namespace in ("", "default")
    ):
        return "the API server"
    if kind == "PriorityClass" and name.startswith("system-"):
        return "the API server"  # system-cluster-critical, system-node-critical; prefix reserved
    if kind == "EndpointSlice" and (labels or {}).get(SLICE_MANAGER) == SLICE_CONTROLLER:
        return "the EndpointSlice controller"
    if kind in RBAC_KINDS and (name in DEFAULT_RBAC_NAMES or name.startswith("system:")):
        return "the API server's default RBAC policy"
    return ""


def _name_problem(kind: str, name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return f"{kind}: metadata.name is required"
    shown = json.dumps(name)
    if kind == "Namespace":
        if not is_dns_label(name):
            return f"Namespace {shown} is not a valid name (a DNS-1123 label)"
        return None
    if kind in PATH_SEGMENT_KINDS:
        if name in (".", "..") or "/" in name or "%" in name:
            return f"{kind} {shown} is not a valid name (it may not contain / or %)"
        return None
    if not is_dns_subdomain(name):
        return (
            f"{kind} {shown} is not a valid name (a DNS-1123 subdomain: lowercase "
            'letters, digits, "-" and ".", at most 253 characters)'
        )
    return None


def render_template(
    value: Any,
    instance: Instance,
    version: AppVersion,
    *,
    images: Mapping[str, str] | None = None,
) -> tuple[Any, tuple[Problem, ...]]:
    """``value`` (a migration Job, a check's object reference) with placeholders replaced.

    The same placeholders and rules as manifests, so a migration names objects
    exactly the way the manifests that create them do. Labels and namespaces are
    the caller's business: a Job and a check reference are not applied objects.
    ``images``: what ``${images.NAME}`` gives instead of the version's references (the
    pinned builds of SPEC section 8, for a caller that knows them).
    """
    problems: list[Problem] = []
    params = _parameters(instance, version, problems)
    if any(p.is_error for p in problems):
        return None, tuple(problems)
    scope = _scope(instance, version, params, images)
    size = _Sizes(scope).value(value)
    if size > MAX_OBJECT_BYTES:
        return None, (
            Problem(
                instance.origin.file,
                None,
                Severity.ERROR,
                f"{instance.name}: a migration's Job or check renders to about {size:,} "
                f"bytes; the limit is {MAX_OBJECT_BYTES:,} (MAX_OBJECT_BYTES)",
            ),
        )
    return _substitute(value, scope), ()


def _scope(
    instance: Instance,
    version: AppVersion,
    params: dict[str, Any],
    images: Mapping[str, str] | None = None,
) -> dict[str, Mapping[str, Any]]:
    return {
        "params": params,
        "images": dict(version.images if images is None else images),
        "instance": {"name": instance.name, "namespace": instance.namespace},
        "app": {"name": version.app, "version": version.key},
    }


def _parameters(instance: Instance, version: AppVersion, problems: list[Problem]) -> dict[str, Any]:
    file = instance.origin.file

    def err(key: str, message: str) -> None:
        lines = instance.origin.lines
        line = lines.get(f"parameters.{key}") or instance.origin.line("parameters")
        problems.append(Problem(file, line, Severity.ERROR, message))

    for key in instance.parameters:
        if key not in version.parameters:
            known = ", ".join(sorted(version.parameters)) or "none"
            err(key, f'unknown parameter "{key}" for {version.app} {version.key} (known: {known})')
    values: dict[str, Any] = {}
    for name, spec in version.parameters.items():
        if name in instance.parameters:
            value = instance.parameters[name]
            expected = _type_of(spec.default)
            if spec.default is not None and expected != _type_of(value):
                err(
                    name,
                    f'parameter "{name}" must be {expected} like its default '
                    f"{json.dumps(spec.default)}, got {json.dumps(value)}",
                )
            values[name] = value
        elif spec.required:
            err(
                name,
                f'parameter "{name}" is required by {version.app} {version.key}'
                + (f" ({spec.description})" if spec.description else ""),
            )
        else:
            values[name] = spec.default
    return values


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null"


def _lookup(expr: str, scope: Mapping[str, Mapping[str, Any]]) -> Any:
    ph = parse_placeholder(expr)
    return scope[ph.scope][ph.name]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _interpolate(text: str, scope: Mapping[str, Mapping[str, Any]]) -> Any:
    if is_single_placeholder(text):
        match = TOKEN.fullmatch(text)
        assert match is not None
        return copy.deepcopy(_lookup(match.group(1), scope))

    def replace(match: Any) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        return _as_text(_lookup(match.group(1), scope))

    return TOKEN.sub(replace, text)


class _Sizes:
    """Sizes of rendered values, counted from the templates without building them.

    A placeholder's value is measured once per render however often it is used;
    the total of the instance's objects so far is kept, so the instance bound is
    checked as each object is admitted, before the next is built.
    """

    def __init__(self, scope: Mapping[str, Mapping[str, Any]]) -> None:
        self.scope = scope
        self.total = 0
        self._json: dict[str, int] = {}
        self._text: dict[str, int] = {}

    def admit(self, template: Template, instance: Instance) -> Problem | None:
        """None when ``template`` may be rendered for ``instance``, else the problem."""
        size = self.template(template)
        self.total += size
        where = f"{template.file} (document {template.index + 1}, rendered for {instance.name})"
        if size > MAX_OBJECT_BYTES:
            message = (
                f"{where}: the rendered {template.kind or 'object'} would be about {size:,} "
                f"bytes; the limit is {MAX_OBJECT_BYTES:,} (the API server refuses objects "
                "over 1.5 MiB): look for a large parameter used many times, or aliases"
            )
        elif self.total > MAX_INSTANCE_BYTES:
            message = (
                f"{where}: the instance's rendered objects would be about {self.total:,} "
                f"bytes so far; the limit for one instance is {MAX_INSTANCE_BYTES:,}"
            )
        else:
            return None
        return Problem(template.file, None, Severity.ERROR, message)

    def template(self, template: Template) -> int:
        """The rendered size of ``template``: its own size plus what placeholders change."""
        paths = template.placeholder_paths
        if paths is None:
            return self.value(template.data)
        size = template.size
        for path in paths:
            text: Any = template.data
            for step in path:
                text = text[step]
            size += self.string(text) - (len(text) + 2)
        return size

    def value(self, value: Any) -> int:
        """The rendered size of any value holding placeholders (keys included)."""
        total = 0
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                total += self.string(item) if "${" in item else len(item) + 2
            elif isinstance(item, dict):
                total += 2
                for key, child in item.items():
                    is_text = isinstance(key, str)
                    total += 2 + (self.string(key) if is_text and "${" in key else len(str(key)))
                    stack.append(child)
            elif isinstance(item, list):
                total += 2 + len(item)
                stack.extend(item)
            else:
                total += json_size(item, MAX_INSTANCE_BYTES)
            if total > MAX_INSTANCE_BYTES:
                break
        return total

    def string(self, text: str) -> int:
        """The rendered size of one string holding placeholders, as JSON."""
        if is_single_placeholder(text):
            expr = text[2:-1]
            if expr not in self._json:
                self._json[expr] = json_size(_lookup(expr, self.scope), MAX_INSTANCE_BYTES)
            return self._json[expr]
        size = len(text) + 2
        for match in TOKEN.finditer(text):
            token = match.group(0)
            if token == "$${":
                size -= 1
                continue
            expr = match.group(1)
            if expr not in self._text:
                self._text[expr] = text_size(_lookup(expr, self.scope), MAX_INSTANCE_BYTES)
            size += self._text[expr] - len(token)
        return size


def _rendered(template: Template, scope: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The template's data with its placeholders replaced, as a new object.

    A copy in one go (pickle, in C) and the placeholder strings rewritten in place,
    found once per template: walking every value of every object for every
    instance was most of the render's time in a pass at thousands of instances.
    """
    paths = template.placeholder_paths
    if paths is None:
        result: dict[str, Any] = _substitute(template.data, scope)
        return result
    obj: dict[str, Any] = pickle.loads(pickle.dumps(template.data, pickle.HIGHEST_PROTOCOL))
    for path in paths:
        parent: Any = obj
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = _interpolate(parent[path[-1]], scope)
    return obj


def _substitute(value: Any, scope: Mapping[str, Mapping[str, Any]]) -> Any:
    """A new value with every placeholder replaced (templates were checked at load)."""
    if isinstance(value, str):
        return _interpolate(value, scope) if "${" in value else value
    if isinstance(value, dict):
        return {
            (
                _as_text(_interpolate(k, scope)) if isinstance(k, str) and "${" in k else k
            ): _substitute(v, scope)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_substitute(item, scope) for item in value]
    return value


def _finish(
    obj: dict[str, Any], instance: Instance, labels: Mapping[str, str], cluster_scoped: set[str]
) -> None:
    meta = obj.setdefault("metadata", {})
    if not is_cluster_scoped(str(obj.get("kind")), cluster_scoped) and not meta.get("namespace"):
        meta["namespace"] = instance.namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}


def namespace_allowed(namespace: str, cluster: Cluster) -> bool:
    """``allowedNamespaces`` entries are shell patterns (``team-*``); None allows all."""
    if cluster.allowed_namespaces is None:
        return True
    if not is_dns_label(namespace):  # a glob's * matches "/" and ".."
        return False
    return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in cluster.allowed_namespaces)


def _check_limits(
    instance: Instance, cluster: Cluster, objects: list[dict[str, Any]], cluster_scoped: set[str]
) -> list[Problem]:
    problems = []
    file = instance.origin.file
    allowed = ", ".join(cluster.allowed_namespaces or ())
    for obj in objects:
        kind = str(obj.get("kind"))
        ref = object_ref(obj)
        if is_cluster_scoped(kind, cluster_scoped):
            if not cluster.allow_cluster_scoped:
                problems.append(
                    Problem(
                        file,
                        instance.origin.line("app"),
                        Severity.ERROR,
                        f"{ref}: cluster-scoped objects are not allowed in cluster "
                        f"{cluster.name} (allowClusterScoped: false)",
                    )
                )
            continue
        namespace = str(obj["metadata"]["namespace"])
        if not namespace_allowed(namespace, cluster):
            problems.append(
                Problem(
                    file,
                    instance.origin.line("namespace"),
                    Severity.ERROR,
                    f'{ref}: namespace "{namespace}" is not allowed in cluster '
                    f"{cluster.name} (allowedNamespaces: {allowed})",
                )
            )
    return problems


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(API group, kind, namespace, name): what makes two rendered objects the same object.

    The version is left out: ``apps/v1`` and ``apps/v1beta1`` name one stored object.
    """
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (group, str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def _check_duplicates(instance: Instance, objects: list[dict[str, Any]]) -> list[Problem]:
    seen: set[tuple[str, str, str, str]] = set()
    problems = []
    for obj in objects:
        key = object_key(obj)
        if key in seen:
            problems.append(
                Problem(
                    instance.origin.file,
                    None,
                    Severity.ERROR,
                    f"{object_ref(obj)} is rendered twice; object names must be unique",
                )
            )
        seen.add(key)
    return problems
