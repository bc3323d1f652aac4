"""``reconciler wave approve``: approve one wave for one release with a one-line commit.

An approval is data in ``waves.yaml`` (``approvals: [{app, version, wave}]``), bound
to the app and the version, so it can never open the gate for a later release. The
edit is textual (one line appended to the ``approvals`` block, the file otherwise
untouched) and checked by parsing the result: everything else must read the same.
The commit carries trailers ``Reconciler-App``, ``Reconciler-Wave`` and
``Reconciler-Version``; committing and pushing are ``channel set``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from reconciler.model.errors import UsageError
from reconciler.model.waves import WAVES_FILE
from reconciler.source.channels import (
    ChannelMoveRefused,
    _check_clean,
    _check_version,
    _commit,
    _open_worktree,
    _push,
)
from reconciler.source.remote import Credentials, NetworkPolicy

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


class ApprovalRefused(ChannelMoveRefused):
    """The approval cannot be written (no waves.yaml, unknown wave, app or version)."""

    reason = "ApprovalRefused"


@dataclass(frozen=True)
class WaveApproval:
    """What ``approve_wave`` did; ``commit`` None when the approval was there already."""

    app: str
    version: str
    wave: str
    file: str = WAVES_FILE
    commit: str | None = None
    pushed_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "version": self.version,
            "wave": self.wave,
            "file": self.file,
            "commit": self.commit,
            "pushed": self.pushed_to is not None,
            "pushedTo": self.pushed_to,
        }


def approve_wave(
    catalog: str | Path,
    app: str,
    version: str,
    wave: str,
    *,
    push: bool = False,
    credentials: Credentials | None = None,
    policy: NetworkPolicy | None = None,
) -> WaveApproval:
    """Record that ``wave`` may start ``app`` ``version`` in the checkout, as one commit."""
    root = Path(catalog).resolve()
    repo = _open_worktree(root)
    for label, name in (("app", app), ("wave", wave)):
        if not _NAME.match(name):
            raise UsageError(f"{label} {name!r} is not a valid name (a DNS-1123 label)")
    _check_version(root, app, version)
    path = root / WAVES_FILE
    if not path.is_file():
        raise ApprovalRefused(f"{WAVES_FILE}: the catalog at {root} has no waves")
    text = path.read_text(encoding="utf-8")
    data = _load(text)
    names = [w.get("name") for w in data.get("waves") or () if isinstance(w, dict)]
    if wave not in names:
        known = ", ".join(str(n) for n in names) or "none"
        raise ApprovalRefused(f"{WAVES_FILE}: no wave {wave!r} (waves: {known})")
    entry = {"app": app, "version": version, "wave": wave}
    approvals = data.get("approvals") or []
    if entry in [{k: str(v) for k, v in a.items()} for a in approvals if isinstance(a, dict)]:
        return WaveApproval(app, version, wave)
    edited = add_approval(text, app, version, wave)
    after = _load(edited)
    if after.get("approvals") != [*approvals, entry] or {
        k: v for k, v in after.items() if k != "approvals"
    } != {k: v for k, v in data.items() if k != "approvals"}:
        raise ApprovalRefused(
            f"{WAVES_FILE}: cannot add the approval as one line (edit the file by hand)"
        )
    _check_clean(repo, path)
    path.write_text(edited, encoding="utf-8")
    commit = _commit(repo, path, _message(app, version, wave))
    pushed = _push(repo, credentials, policy) if push else None
    return WaveApproval(app, version, wave, WAVES_FILE, commit, pushed)


def add_approval(text: str, app: str, version: str, wave: str) -> str:
    """``text`` with one approval line at the end of its ``approvals`` block.

    Without the block, it is started (``approvals:`` and the line, at the end);
    ``approvals: []`` becomes the block.
    """
    item = f"{{app: {app}, version: {version}, wave: {wave}}}"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if line.startswith("approvals:")), None)
    if start is None:
        return "".join(lines) + f"approvals:\n  - {item}\n"
    if lines[start].split(":", 1)[1].strip() in ("[]", "null", "~"):
        lines[start] = "approvals:\n"
        lines.insert(start + 1, f"  - {item}\n")
        return "".join(lines)
    end, indent = start + 1, "  "
    while end < len(lines) and not _TOP_KEY.match(lines[end]):
        stripped = lines[end].lstrip()
        if stripped.startswith("- "):
            indent = lines[end][: len(lines[end]) - len(stripped)]
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # after the last item, not after the blank lines that end the block
    lines.insert(end, f"{indent}- {item}\n")
    return "".join(lines)


def _load(text: str) -> dict[str, Any]:
    try:
        data = YAML(typ="safe").load(text)
    except YAMLError as e:
        raise ApprovalRefused(f"{WAVES_FILE}: invalid YAML: {e}") from e
    if not isinstance(data, dict) or data.get("kind") != "Waves":
        raise ApprovalRefused(f"{WAVES_FILE}: not a Waves file (kind: Waves)")
    return data


def _message(app: str, version: str, wave: str) -> str:
    return (
        f"{app} {version}: approve wave {wave}\n\n"
        f"Wave {wave} may start {app} {version} once earlier waves proved it; a later\n"
        "version needs an approval of its own.\nMade by `reconciler wave approve`.\n\n"
        f"Reconciler-App: {app}\nReconciler-Wave: {wave}\nReconciler-Version: {version}\n"
    )
