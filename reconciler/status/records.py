"""Status files: ``InstanceStatus`` <-> ``instances/<instance>.yaml`` bytes, and change detection.

The status ledger (``reconciler.source.ledger``) calls ``prepare_record`` for every
instance of a pass and commits only the ones it marks as changed, so "never a
commit for a pass that changed nothing" is decided here, in one place, without Git.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import yaml

from reconciler.catalog import YamlReadError, load_bounded
from reconciler.model.status import Condition, InstanceStatus, StatusFormatError

try:  # libyaml is much faster; history benchmarks parse thousands of records
    from yaml import CSafeDumper as _Dumper
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]

INSTANCES_DIR = "instances"


class StatusFileError(ValueError):
    """A status file that cannot be read; ``str()`` names the file (and line)."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.detail = message


def status_path(instance: str) -> str:
    """The file of an instance on the status branch."""
    return f"{INSTANCES_DIR}/{instance}.yaml"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dump_status(status: InstanceStatus) -> bytes:
    """The file content for ``status``: block-style YAML in the key order of SPEC section 3."""
    text = yaml.dump(
        status.to_dict(),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1000,
    )
    return text.encode("utf-8")


def parse_status(data: bytes, path: str) -> InstanceStatus:
    """Parse a status file; raises ``StatusFileError`` (never a YAML or KeyError) when bad."""
    try:
        # bounded like catalog files: a hand-made alias bomb must not stop every write
        loaded: Any = load_bounded(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise StatusFileError(path, "not UTF-8 text") from e
    except YamlReadError as e:
        raise StatusFileError(path, e.message, e.line) from e
    try:
        status = InstanceStatus.from_dict(loaded)
    except StatusFormatError as e:
        raise StatusFileError(path, str(e)) from e
    expected = path.rsplit("/", 1)[-1].removesuffix(".yaml")
    if status.instance != expected:
        raise StatusFileError(path, f"instance is {status.instance!r}, expected {expected!r}")
    return status


@dataclass(frozen=True)
class PreparedRecord:
    """What the ledger should write for one instance, and whether it is worth a commit."""

    status: InstanceStatus
    previous: InstanceStatus | None
    changed: bool


def prepare_record(
    new: InstanceStatus, previous: InstanceStatus | None, *, now: str | None = None
) -> PreparedRecord:
    """Complete ``new`` against the recorded ``previous`` and decide whether it changed.

    Conditions default from the phase; a condition whose status did not change keeps
    its recorded ``lastTransitionTime`` (kstatus semantics), so re-recording the same
    state yields an identical record and no commit. ``updatedAt`` is kept from
    ``previous`` when nothing changed, else set to ``now``.

    ``sourceCommit`` alone is not a change: it names the catalog commit at which the
    instance's recorded state was established. Otherwise every catalog commit (a
    one-line channel move for one app) would write a status commit for every
    instance of the cluster, burying the one that matters in ``git log``. Unless
    ``new.applied``: the pass changed the instance's objects at that commit (a
    parameter edit that stays Ready), and the record must say which commit runs.
    """
    stamp = now or now_rfc3339()
    status = new.with_default_conditions()
    # carrying transitions changes only ``lastTransitionTime``, which the state compared
    # leaves out: the record is copied once, when it is complete (a first install
    # prepares 10,000 records, and a copy of one costs as much as comparing it)
    conditions = _carry_transitions(status.conditions, previous, stamp)
    changed = (
        previous is None
        or _state(previous) != _state(status)
        or (new.applied and bool(new.source_commit) and new.source_commit != previous.source_commit)
    )
    if changed:
        status = replace(status, conditions=conditions, updated_at=stamp)
    else:
        assert previous is not None
        status = replace(
            status,
            conditions=conditions,
            updated_at=previous.updated_at,
            source_commit=previous.source_commit,
        )
    return PreparedRecord(status=status, previous=previous, changed=changed)


def _state(status: InstanceStatus) -> dict[str, object]:
    key = status.state_key()
    key.pop("sourceCommit", None)
    return key


def _carry_transitions(
    conditions: tuple[Condition, ...], previous: InstanceStatus | None, stamp: str
) -> tuple[Condition, ...]:
    out = []
    for cond in conditions:
        before = previous.condition(cond.type) if previous is not None else None
        if before is not None and before.status == cond.status and before.last_transition_time:
            cond = replace(cond, last_transition_time=before.last_transition_time)
        elif not cond.last_transition_time:
            cond = replace(cond, last_transition_time=stamp)
        out.append(cond)
    return tuple(out)
