"""Fixtures shared by tests/source, tests/status and tests/ledger (imported by their conftests).

Every repository is real: a catalog checkout, a bare remote over file://, a
``git daemon`` and an authenticated ``git http-backend`` on loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.source.servers import GitDaemon, GitHttpServer, git, head

TOKEN = "s3cr3t-t0ken-value"

CHANNELS = """\
# Channel pointers for podinfo: moving one is a one-line commit.
apiVersion: reconciler/v1
kind: Channels
app: podinfo
channels:
    stable: 6.5.0     # promoted after a week on fast
    fast: "6.6.0"
    experimental: 6.7.0-rc.1
"""

VERSIONS = {"6.4.0": False, "6.5.0": False, "6.6.0": False, "6.6.1": True, "6.7.0-rc.1": False}


def write_catalog(root: Path) -> None:
    app = root / "apps" / "podinfo"
    app.mkdir(parents=True)
    (app / "app.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: App\nname: podinfo\ndescription: Demo\n"
    )
    (app / "channels.yaml").write_text(CHANNELS)
    for version, yanked in VERSIONS.items():
        vdir = app / "versions" / version
        vdir.mkdir(parents=True)
        (vdir / "version.yaml").write_text(
            "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\n"
            f"version: {version}\nyanked: {str(yanked).lower()}\n"
        )
    inst = root / "clusters" / "prod" / "instances"
    inst.mkdir(parents=True)
    (inst / "web.yaml").write_text(
        "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
        "channel: stable\nnamespace: web\n"
    )


def commit_file(repo: Path, rel: str, content: str, message: str) -> str:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)
    return head(repo)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(path))
    for var in ("RECONCILER_GIT_TOKEN", "RECONCILER_GIT_TOKEN_FILE", "RECONCILER_GIT_USERNAME"):
        monkeypatch.delenv(var, raising=False)
    return path


@pytest.fixture
def catalog_repo(tmp_path: Path) -> Path:
    """A catalog checkout on ``main`` with one commit."""
    root = tmp_path / "catalog"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write_catalog(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial catalog")
    return root


@pytest.fixture
def remotes(tmp_path: Path) -> Path:
    path = tmp_path / "remotes"
    path.mkdir()
    return path


@pytest.fixture
def bare_remote(remotes: Path, catalog_repo: Path) -> Path:
    """A bare remote of ``catalog_repo``; the checkout tracks it as origin/main."""
    bare = remotes / "catalog.git"
    git(remotes, "clone", "-q", "--bare", str(catalog_repo), str(bare))
    git(catalog_repo, "remote", "add", "origin", str(bare))
    git(catalog_repo, "fetch", "-q", "origin")
    git(catalog_repo, "branch", "-q", "--set-upstream-to=origin/main", "main")
    return bare


@pytest.fixture
def empty_remote(remotes: Path) -> Path:
    bare = remotes / "status.git"
    git(remotes, "init", "-q", "--bare", str(bare))
    return bare


@pytest.fixture
def git_daemon(remotes: Path) -> Iterator[GitDaemon]:
    daemon = GitDaemon(remotes).start()
    yield daemon
    daemon.stop()


@pytest.fixture
def http_server(remotes: Path) -> Iterator[GitHttpServer]:
    server = GitHttpServer(remotes, "reconciler", TOKEN).start()
    yield server
    server.stop()
