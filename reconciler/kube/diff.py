"""What apply would change, as unified YAML diffs per object: ``reconciler diff``.

Like ``kubectl diff``, the "after" side is the API server's own answer to a
dry-run server-side apply, so defaults and merges look exactly as apply would
leave them. Objects whose live state already matches (``compare.matches``) are
not sent at all, so diffing an unchanged cluster costs one list per kind.
Objects the inventory lists and Git no longer has show as deletions.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.kube.apply import ApplyOptions, InstanceTarget, place_objects
from reconciler.kube.client import KubeClient
from reconciler.kube.compare import display_form, fingerprint, matches, overlay
from reconciler.kube.csaupgrade import without_leftovers
from reconciler.kube.errors import ConflictError
from reconciler.kube.inventory import INSTANCE_LABEL, MANAGED_BY, MANAGER_NAME
from reconciler.kube.limits import violations
from reconciler.kube.live import LiveState
from reconciler.kube.order import apply_order, prune_order
from reconciler.model.changeset import ObjectRef
from reconciler.model.errors import KubeError
from reconciler.model.secrets import mask_secret, mask_secret_pair

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ObjectDiff:
    """One object that differs: ``change`` is create, update, delete or error."""

    instance: str
    ref: ObjectRef
    change: str
    diff: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            **self.ref.to_dict(),
            "change": self.change,
            "diff": self.diff,
            "message": self.message,
        }


def diff_instance(
    client: KubeClient,
    target: InstanceTarget,
    options: ApplyOptions | None = None,
    live: LiveState | None = None,
    *,
    show_secrets: bool = False,
) -> list[ObjectDiff]:
    """Every difference between the cluster and ``target``, in apply then prune order.

    Secret values are masked (``***``, ``*** (changed)``) unless ``show_secrets``.
    """
    options = options or ApplyOptions()
    live = live or LiveState(client, target.cluster)
    objects = place_objects(client, target)
    refused = violations(objects, options.limits, lambda o: bool(ObjectRef.of(o).namespace))
    diffs = [ObjectDiff(target.instance, ref, "error", "", msg) for ref, msg in refused.items()]
    if refused:
        return diffs
    old = live.inventory(target.instance)
    for obj in apply_order(objects):
        recorded = old.objects if old else {}
        found = _diff_one(client, live, target.instance, obj, recorded, options, show_secrets)
        if found is not None:
            diffs.append(found)
    desired = {ObjectRef.of(o) for o in objects}
    for ref in prune_order(set(old.objects) - desired if old else ()):
        found = _diff_removal(live, target.instance, ref, show_secrets)
        if found is not None:
            diffs.append(found)
    return diffs


def _diff_one(
    client: KubeClient,
    live: LiveState,
    instance: str,
    obj: Mapping[str, Any],
    recorded: Mapping[ObjectRef, str],
    options: ApplyOptions,
    show_secrets: bool = False,
) -> ObjectDiff | None:
    ref = ObjectRef.of(obj)
    try:
        current = live.fetch(ref)
        if current is not None and recorded.get(ref) == fingerprint(obj) and matches(obj, current):
            return None
        after = _would_be(client, live, obj, current, options.force_conflicts)
    except KubeError as e:
        return ObjectDiff(instance, ref, "error", "", str(e))
    before, shown_after = display_form(current), display_form(after)
    if not show_secrets:
        masked_before, masked_after = mask_secret_pair(before, shown_after)
        before, shown_after = masked_before or {}, masked_after or {}
    before_text, after_text = _yaml(before), _yaml(shown_after)
    if current is not None and before_text == after_text:
        return None
    change = "create" if current is None else "update"
    return ObjectDiff(instance, ref, change, unified(ref, before_text, after_text))


def _would_be(
    client: KubeClient,
    live: LiveState,
    obj: Mapping[str, Any],
    current: JsonObject | None,
    force: bool,
) -> Mapping[str, Any]:
    """The object after apply: the server's dry-run answer when it can give one.

    Apply also deletes what only client-side ``kubectl apply`` owned; so does this.
    """
    namespace = ObjectRef.of(obj).namespace
    if namespace and not live.namespace_exists(namespace):
        return obj  # its namespace does not exist yet: a dry run would be refused
    try:
        return without_leftovers(client.apply(obj, force=force, dry_run=True).body)
    except ConflictError:
        # apply reverts imperative edits and reports other conflicts; show the intent
        if not current:
            intent: Mapping[str, Any] = overlay({}, obj)
            return intent
        return without_leftovers(client.apply(obj, force=True, dry_run=True).body)


def _diff_removal(
    live: LiveState, instance: str, ref: ObjectRef, show_secrets: bool = False
) -> ObjectDiff | None:
    try:
        current = live.fetch(ref)
    except KubeError as e:
        return ObjectDiff(instance, ref, "error", "", str(e))
    labels = ((current or {}).get("metadata") or {}).get("labels") or {}
    if current is None or labels.get(MANAGED_BY) != MANAGER_NAME:
        return None
    if labels.get(INSTANCE_LABEL) != instance:
        return None
    shown = display_form(current) if show_secrets else mask_secret(display_form(current))
    return ObjectDiff(instance, ref, "delete", unified(ref, _yaml(shown), ""))


def unified(ref: ObjectRef, before: str, after: str) -> str:
    """A unified diff with ``--- live/<ref>`` and ``+++ desired/<ref>`` headers."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"live/{ref}",
        tofile=f"desired/{ref}",
    )
    return "".join(lines)


def _yaml(obj: Mapping[str, Any]) -> str:
    if not obj:
        return ""
    return yaml.safe_dump(dict(obj), sort_keys=True, default_flow_style=False)
