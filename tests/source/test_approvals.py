"""``wave approve`` (SPEC section 4b): one-line commits to waves.yaml, bound to app+version."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.model.errors import UsageError
from reconciler.source.approvals import ApprovalRefused, add_approval, approve_wave
from reconciler.source.scaffold import CatalogRepo
from tests.factories import catalog_repo, write_catalog

WAVES = """\
# the fleet's waves
apiVersion: reconciler/v1
kind: Waves
waves:
  - name: canary
    clusters: [prod]
  - name: eu
    clusters: ["*"]
    approval: required
"""


@pytest.fixture
def repo(tmp_path: Path) -> CatalogRepo:
    source = write_catalog(tmp_path / "template", {"waves.yaml": WAVES})
    return catalog_repo(source, tmp_path / "repos")


def git(repo: CatalogRepo, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo.work), *args], check=True, capture_output=True, text=True
    ).stdout


def test_approve_is_a_one_line_commit_with_trailers(repo: CatalogRepo) -> None:
    done = approve_wave(repo.work, "podinfo", "6.6.0", "eu")
    assert done.commit is not None and done.pushed_to is None
    assert git(repo, "show", "--format=", "--numstat", "HEAD").split()[:3] == [
        "2",
        "0",
        "waves.yaml",
    ]  # the first approval starts the block: "approvals:" and its line
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Reconciler-App: podinfo" in trailers
    assert "Reconciler-Wave: eu" in trailers
    assert "Reconciler-Version: 6.6.0" in trailers
    second = approve_wave(repo.work, "podinfo", "6.5.0", "eu")
    assert second.commit is not None
    diff = git(repo, "show", "--format=", "HEAD", "--", "waves.yaml")
    added = [line for line in diff.splitlines() if line.startswith("+") and "+++" not in line]
    assert added == ["+  - {app: podinfo, version: 6.5.0, wave: eu}"]
    waves = load_catalog(repo.work).waves
    assert waves is not None and waves.valid
    assert waves.approved("podinfo", "6.6.0", "eu") and waves.approved("podinfo", "6.5.0", "eu")
    assert not waves.approved("podinfo", "6.7.0", "eu")
    assert "# the fleet's waves" in (repo.work / "waves.yaml").read_text()


def test_approving_twice_makes_no_commit(repo: CatalogRepo) -> None:
    approve_wave(repo.work, "podinfo", "6.6.0", "eu")
    head = git(repo, "rev-parse", "HEAD")
    assert approve_wave(repo.work, "podinfo", "6.6.0", "eu").commit is None
    assert git(repo, "rev-parse", "HEAD") == head


def test_push_sends_the_commit_upstream(repo: CatalogRepo) -> None:
    done = approve_wave(repo.work, "podinfo", "6.6.0", "eu", push=True)
    remote = subprocess.run(
        ["git", "-C", str(repo.remote), "rev-parse", "main"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert done.pushed_to == "origin/main" and remote == done.commit


@pytest.mark.parametrize(
    ("app", "version", "wave", "error", "text"),
    [
        ("podinfo", "6.6.0", "us", ApprovalRefused, "no wave 'us' (waves: canary, eu)"),
        ("podinfo", "9.9.9", "eu", Exception, "app podinfo has no version 9.9.9"),
        ("nope", "6.6.0", "eu", Exception, "no such app"),
        ("podinfo", "v6", "eu", UsageError, "v6"),
        ("podinfo", "6.6.0", "EU", UsageError, "not a valid name"),
    ],
)
def test_refused_approvals_name_why(
    repo: CatalogRepo, app: str, version: str, wave: str, error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        approve_wave(repo.work, app, version, wave)


def test_a_catalog_without_waves_refuses(tmp_path: Path) -> None:
    plain = catalog_repo(write_catalog(tmp_path / "t"), tmp_path / "r")
    with pytest.raises(ApprovalRefused, match="has no waves"):
        approve_wave(plain.work, "podinfo", "6.6.0", "eu")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("kind: Waves\n", "kind: Waves\napprovals:\n  - {app: a, version: 1.0.0, wave: w}\n"),
        (
            "approvals: []\nkind: Waves\n",
            "approvals:\n  - {app: a, version: 1.0.0, wave: w}\nkind: Waves\n",
        ),
        (
            "approvals:\n- {app: b, version: 1.0.0, wave: w}\n\nkind: Waves\n",
            "approvals:\n- {app: b, version: 1.0.0, wave: w}\n- {app: a, version: 1.0.0, wave: w}"
            "\n\nkind: Waves\n",
        ),
        (
            "approvals:\n    - app: b\n      version: 1.0.0\n      wave: w\nkind: Waves",
            "approvals:\n    - app: b\n      version: 1.0.0\n      wave: w\n"
            "    - {app: a, version: 1.0.0, wave: w}\nkind: Waves\n",
        ),
    ],
)
def test_add_approval_appends_one_line_to_the_block(before: str, after: str) -> None:
    assert add_approval(before, "a", "1.0.0", "w") == after
