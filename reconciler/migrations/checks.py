"""State checks: does the cluster still need this migration?

SPEC section 5: the cluster's state decides (``objectMissing``, ``objectExists``,
``fieldEquals``), the deployed version is at most an extra filter. Every listed
condition must hold for the migration to be needed; a check with no conditions
always holds (the migration runs once). Object references carry the same
``${...}`` placeholders as manifests and are rendered before the check.

Checks read the cluster through :class:`ObjectReader` (``KubeClient.get`` is one:
a GET of one object, ``None`` on 404), so this module never imports the client.
Each check is timed: a migrated cluster must pass its hooks in no time, so a
check slower than :data:`SLOW_CHECK_SECONDS` is reported as a warning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.model.catalog import AppVersion, Instance
from reconciler.model.changeset import ObjectRef
from reconciler.model.migrations import CheckRef, MigrationCheck
from reconciler.model.problems import Problem
from reconciler.model.secrets import CHANGED, MASK, is_secret
from reconciler.model.version import VersionSyntaxError, parse_version
from reconciler.render import render_template
from reconciler.resolve import RangeSyntaxError, parse_range

SLOW_CHECK_SECONDS = 1.0


class ObjectReader(Protocol):
    """GET of one object: its body, or ``None`` when it does not exist (404)."""

    def get(self, ref: ObjectRef) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one check, how long it took and why."""

    needed: bool
    reason: str
    duration: float
    error: str | None = None  # the check itself failed (API error): the migration fails

    @property
    def slow(self) -> bool:
        return self.duration > SLOW_CHECK_SECONDS

    @property
    def warning(self) -> str | None:
        if not self.slow:
            return None
        return (
            f"check took {self.duration:.1f}s (over {SLOW_CHECK_SECONDS:.0f}s): "
            "a migrated cluster should pass its hooks in no time"
        )


def render_check(
    check: MigrationCheck, instance: Instance, version: AppVersion
) -> tuple[MigrationCheck, tuple[Problem, ...]]:
    """``check`` with its placeholders rendered for ``instance`` (like its manifests)."""
    rendered, problems = render_template(check.to_dict(), instance, version)
    if problems:
        return check, problems
    return MigrationCheck.from_dict(rendered), ()


def object_ref(ref: CheckRef, default_namespace: str) -> ObjectRef:
    """The reference a check GETs; a reference without a namespace uses the instance's.

    Cluster-scoped kinds ignore the namespace when the client builds the path.
    """
    return ObjectRef(ref.api_version, ref.kind, ref.namespace or default_namespace, ref.name)


def field_at(obj: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """The value at dotted ``path`` (list items by number); ``(False, None)`` when absent."""
    value: Any = obj
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def _same(live: Any, expected: Any) -> bool:
    # ConfigMap data is always strings: value "1" and 1 name the same state.
    if isinstance(live, str) and not isinstance(expected, str):
        return (
            live == str(expected).lower() if isinstance(expected, bool) else live == str(expected)
        )
    return bool(live == expected)


def version_filter(expr: str, deployed: str | None) -> tuple[bool, str]:
    """Whether ``deployed`` passes a ``deployedVersion`` filter, and why (raises on bad input)."""
    if deployed is None:
        return False, f"deployedVersion {expr}: nothing deployed yet (a first install)"
    try:
        matches = parse_range(expr).matches(parse_version(deployed), include_prerelease=True)
    except (RangeSyntaxError, VersionSyntaxError) as e:
        raise _CheckError(f"deployedVersion {expr}: {e}") from e
    verdict = "matches" if matches else "does not match"
    return matches, f"deployed {deployed} {verdict} {expr}"


class _CheckError(ValueError):
    pass


def evaluate_check(
    check: MigrationCheck,
    reader: ObjectReader,
    *,
    namespace: str,
    deployed_version: str | None,
    clock: Callable[[], float] = time.monotonic,
) -> CheckResult:
    """Evaluate an already rendered ``check`` against the cluster (stops at the first miss).

    ``namespace`` is the instance's (used by references without one). A failing
    GET (unknown kind, API error) is an ``error``: the migration fails with it
    rather than guessing whether it is needed.
    """
    start = clock()
    reasons: list[str] = []
    try:
        needed = _evaluate(check, reader, namespace, deployed_version, reasons)
    except _CheckError as e:
        return CheckResult(False, "check failed", clock() - start, error=str(e))
    except Exception as e:  # a reader error, translated once here into the record's message
        return CheckResult(False, "check failed", clock() - start, error=f"check failed: {e}")
    reason = "; ".join(reasons) if reasons else "no check: runs once"
    return CheckResult(needed, reason, clock() - start)


def _field_reason(
    ref: ObjectRef, path: str, found: bool, equal: bool, live: Any, wanted: Any
) -> str:
    """What a ``fieldEquals`` found, for the status record and the ledger.

    Both are written to Git and to a ConfigMap anyone with read access sees, so a
    value read from a Secret is never shown, only whether it matched (the masks
    of ``diff``: ``***``, ``*** (changed)``).
    """
    if not found:
        return f"{ref} {path} is absent (wanted {MASK if _secret(ref) else repr(wanted)})"
    if _secret(ref):
        verdict = (
            f"is the wanted value ({MASK}" if equal else f"differs from the wanted value ({CHANGED}"
        )
        return f"{ref} {path} {verdict}; Secret values are not shown)"
    return f"{ref} {path} is {live!r} (wanted {wanted!r})"


def _secret(ref: ObjectRef) -> bool:
    return is_secret({"apiVersion": ref.api_version, "kind": ref.kind})


def _evaluate(
    check: MigrationCheck,
    reader: ObjectReader,
    namespace: str,
    deployed: str | None,
    reasons: list[str],
) -> bool:
    if check.deployed_version is not None:
        ok, why = version_filter(check.deployed_version, deployed)
        reasons.append(why)
        if not ok:
            return False
    if check.object_missing is not None:
        ref = object_ref(check.object_missing, namespace)
        exists = reader.get(ref) is not None
        reasons.append(f"{ref} {'exists' if exists else 'is missing'}")
        if exists:
            return False
    if check.object_exists is not None:
        ref = object_ref(check.object_exists, namespace)
        exists = reader.get(ref) is not None
        reasons.append(f"{ref} {'exists' if exists else 'is missing'}")
        if not exists:
            return False
    if check.field_equals is not None:
        fe = check.field_equals
        ref = object_ref(fe.ref, namespace)
        obj = reader.get(ref)
        if obj is None:
            reasons.append(f"{ref} is missing")
            return False
        found, live = field_at(obj, fe.path)
        equal = found and _same(live, fe.value)
        reasons.append(_field_reason(ref, fe.path, found, equal, live, fe.value))
        if not equal:
            return False
    return True


__all__ = [
    "SLOW_CHECK_SECONDS",
    "CheckResult",
    "ObjectReader",
    "evaluate_check",
    "field_at",
    "object_ref",
    "render_check",
    "version_filter",
]
