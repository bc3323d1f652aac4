"""``reconciler rollout promote|pause|resume``: rollout gates as one-line commits.

A rollout's gates live in the instance file (SPEC section 4, "Gates are
commits"), so a promotion is reviewed and recorded like any other change: this
edits ``clusters/<cluster>/instances/<instance>.yaml`` with a ruamel.yaml
round-trip (comments, order and quoting survive), refuses an edit that would
change more than one line, and commits only that file with the trailers
``Reconciler-Instance`` and ``Reconciler-Rollout-Action``. The daemon's next pass
reads the new gate; nothing talks to the cluster here.

A promotion never touches ``partition``: that is the instance's policy for every
rollout. It writes an approval bound to the version the rollout goes to,
``promoted: {to: 6.6.0, through: 2}``, which a rollout to any other version
ignores, so the next release stops at the partition again. (Until v2 a promotion
raised ``partition`` and the last one removed it, which disarmed the gate for
every later release; a file a v2 promotion edited is read as it stands: its
partition is the gate, see docs/ROLLOUTS.md.)
"""

from __future__ import annotations

import difflib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from reconciler.model.errors import ReconcilerError, UsageError
from reconciler.source.channels import _check_clean, _commit, _open_worktree, _push
from reconciler.source.remote import Credentials, NetworkPolicy

ACTIONS = ("promote", "pause", "resume")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


class GateRefused(ReconcilerError):
    """The gate cannot change: unknown instance, no plan, not gated, already paused..."""

    reason = "RolloutGateRefused"


@dataclass(frozen=True)
class GateChange:
    """What ``change_gate`` did: the file, the gate before and after, the commit."""

    cluster: str
    instance: str
    action: str
    file: str
    before: str
    after: str
    commit: str
    pushed_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "instance": self.instance,
            "action": self.action,
            "file": self.file,
            "from": self.before,
            "to": self.after,
            "commit": self.commit,
            "pushed": self.pushed_to is not None,
            "pushedTo": self.pushed_to,
        }


def change_gate(
    catalog: str | Path,
    cluster: str,
    instance: str,
    action: str,
    *,
    batches: int | None,
    target: str | None = None,
    approve_all: bool = False,
    push: bool = False,
    credentials: Credentials | None = None,
    policy: NetworkPolicy | None = None,
) -> GateChange:
    """Promote, pause or resume ``instance``'s rollout with one commit.

    ``batches`` is the number of batches of the instance's effective plan (the
    caller merges version and instance file), ``None`` when it has none: then
    there is nothing to gate. ``target`` is the version the instance rolls to
    (what promote approves). Promote approves one more batch of the rollout to
    ``target`` past the partition (``approve_all``: every remaining batch); pause
    sets ``paused: true``; resume removes ``paused``.
    """
    if action not in ACTIONS:
        raise UsageError(f"unknown rollout action {action!r} (one of {', '.join(ACTIONS)})")
    for label, name in (("cluster", cluster), ("instance", instance)):
        if not name or not set(name) <= _NAME_CHARS or name[0] == "-" or name[-1] == "-":
            raise UsageError(f"{label} {name!r} is not a valid name (a DNS-1123 label)")
    root = Path(catalog).resolve()
    repo = _open_worktree(root)
    path = _instance_file(root, cluster, instance)
    rel = path.relative_to(root).as_posix()
    if batches is None:
        raise GateRefused(
            f"{rel}: {cluster}/{instance} has no rollout plan (rollout.batches in the instance "
            "file or its version.yaml); it changes at once and has nothing to gate"
        )
    text = path.read_text(encoding="utf-8")
    new_text, before, after = edit_gate(
        text, action, batches, rel, target=target, approve_all=approve_all
    )
    _check_clean(repo, path)
    path.write_text(new_text, encoding="utf-8")
    message = _message(cluster, instance, action, before, after)
    commit = _commit(repo, path, message)
    pushed = _push(repo, credentials, policy) if push else None
    return GateChange(cluster, instance, action, rel, before, after, commit, pushed)


def edit_gate(
    text: str,
    action: str,
    batches: int,
    where: str,
    *,
    target: str | None = None,
    approve_all: bool = False,
) -> tuple[str, str, str]:
    """``text`` with the gate changed, and the gate before/after in words.

    Raises ``GateRefused`` when the action does not apply (promote without a
    partition or a target version, or with every batch already approved; pause
    when paused, resume when not paused) or the edit would change more than one
    line.
    """
    yaml = _yaml()
    data = _load(yaml, text, where)
    rollout = data.get("rollout")
    if rollout is not None and not isinstance(rollout, CommentedMap):
        raise GateRefused(f"{where}: rollout must be a mapping")
    if rollout is None:
        rollout = CommentedMap()
        rollout.fa.set_flow_style()
        data["rollout"] = rollout
    paused = rollout.get("paused") is True
    if action == "promote":
        before, after = _promote(rollout, paused, batches, where, target, approve_all)
    elif action == "pause":
        if paused:
            raise GateRefused(f"{where}: the rollout is already paused")
        rollout["paused"] = True
        before, after = "running", "paused"
    else:
        if not paused:
            raise GateRefused(f"{where}: the rollout is not paused")
        rollout["paused"] = _REMOVE
        before, after = "paused", "running"
    dumped = _dump_removing(yaml, data, rollout)
    if _changed_lines(text, dumped) > 1:
        raise GateRefused(
            f"{where}: cannot {action} without reformatting other lines; edit rollout by hand"
        )
    return dumped, before, after


_REMOVE = object()  # marks a gate key to remove


def _promote(
    rollout: CommentedMap,
    paused: bool,
    batches: int,
    where: str,
    target: str | None,
    approve_all: bool,
) -> tuple[str, str]:
    """Write ``promoted: {to: target, through: n}``; the partition stays as it is."""
    if paused:
        raise GateRefused(f"{where}: the rollout is paused; resume it before promoting")
    partition = rollout.get("partition")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise GateRefused(
            f"{where}: rollout.partition is not set, so there is no gate to promote "
            "(every rollout already goes through every batch)"
        )
    if target is None:
        raise GateRefused(
            f"{where}: cannot tell which version the instance rolls to, so there is "
            "nothing to approve (fix the catalog first: reconciler validate)"
        )
    promoted = rollout.get("promoted")
    if promoted is not None and not isinstance(promoted, CommentedMap):
        raise GateRefused(f"{where}: rollout.promoted must be a mapping {{to, through}}")
    approved = partition
    if promoted is not None and str(promoted.get("to")) == target:
        through = promoted.get("through")
        if isinstance(through, int) and not isinstance(through, bool):
            approved = max(partition, through)
    if approved >= batches:
        raise GateRefused(
            f"{where}: the rollout to {target} is already approved through its last batch "
            f"({batches})"
        )
    upto = batches if approve_all else approved + 1
    before = f"gated after batch {approved}"
    after = f"{target} approved through batch {upto}"
    if promoted is None:
        promoted = CommentedMap()
        promoted.fa.set_flow_style()
        rollout["promoted"] = promoted
    promoted["to"] = target
    promoted["through"] = upto
    return before, after


def _dump_removing(yaml: YAML, data: CommentedMap, rollout: CommentedMap) -> str:
    """Dump with marked keys removed; where removing would empty ``rollout`` (two
    lines change), the key is kept with its neutral value instead (``paused:
    false``), so the commit stays a one-line diff."""
    neutral = {"paused": False}
    marked = [k for k, v in rollout.items() if v is _REMOVE]
    if len(rollout) > len(marked):
        for key in marked:
            del rollout[key]
    else:
        for key in marked:
            rollout[key] = neutral[key]
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _changed_lines(before: str, after: str) -> int:
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return max(added, removed)


def _instance_file(root: Path, cluster: str, instance: str) -> Path:
    directory = root / "clusters" / cluster / "instances"
    if not (root / "clusters" / cluster).is_dir():
        raise GateRefused(f"clusters/{cluster}: no such cluster in the catalog at {root}")
    for suffix in (".yaml", ".yml"):
        path = directory / f"{instance}{suffix}"
        if path.is_file():
            return path
    known = sorted(p.stem for p in directory.glob("*.y*ml")) if directory.is_dir() else []
    raise GateRefused(
        f"clusters/{cluster}/instances/{instance}.yaml: no such instance "
        f"(instances: {', '.join(known) or 'none'})"
    )


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.representer.add_representer(type(None), _null)
    return yaml


def _null(representer: Any, _value: None) -> Any:
    """``null`` spelled out (ruamel writes nothing), as SPEC's ``partition: null``."""
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _load(yaml: YAML, text: str, where: str) -> CommentedMap:
    try:
        data = yaml.load(text)
    except YAMLError as e:
        raise GateRefused(f"{where}: invalid YAML: {e}") from e
    if not isinstance(data, CommentedMap) or data.get("kind") != "Instance":
        raise GateRefused(f"{where}: not an Instance file (kind: Instance)")
    return data


def _message(cluster: str, instance: str, action: str, before: str, after: str) -> str:
    return (
        f"{cluster}/{instance}: rollout {action} ({before} -> {after})\n\n"
        f"The rollout of {instance} on cluster {cluster}: {before} -> {after}.\n"
        f"Made by `reconciler rollout {action}`.\n\n"
        f"Reconciler-Cluster: {cluster}\nReconciler-Instance: {instance}\n"
        f"Reconciler-Rollout-Action: {action}\n"
    )
