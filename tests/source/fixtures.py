"""Fixtures shared by tests/source, tests/status and tests/ledger (imported by their conftests).

Every repository is real: a catalog checkout, a bare remote over file://, a
``git daemon`` and an authenticated ``git http-backend`` on loopback.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
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
    """A catalog checkout on ``main`` with one commit (a copy of ``_built()``'s)."""
    root = tmp_path / "catalog"
    shutil.copytree(_built() / "catalog", root, symlinks=True)
    return root


@pytest.fixture
def remotes(tmp_path: Path) -> Path:
    path = tmp_path / "remotes"
    path.mkdir()
    return path


@pytest.fixture
def bare_remote(remotes: Path, catalog_repo: Path) -> Path:
    """A bare remote of ``catalog_repo``; the checkout tracks it as origin/main.

    Copied from ``_built()`` too while ``catalog_repo`` is still that build's commit (a
    fixture may have committed to it first: then made with Git, as the build was).
    """
    return make_bare_remote(catalog_repo, remotes / "catalog.git")


def make_bare_remote(catalog: Path, bare: Path) -> Path:
    """``bare`` as a bare clone of ``catalog``, which then tracks it as origin/main."""
    built = _built()
    if head(catalog) != head(built / "catalog"):
        _add_bare_remote(catalog, bare)
        return bare
    shutil.copytree(built / "catalog.git", bare, symlinks=True)
    shutil.rmtree(catalog / ".git")
    shutil.copytree(built / "tracking.git", catalog / ".git", symlinks=True)
    for config, old, new in (
        (bare / "config", built / "catalog", catalog),
        (catalog / ".git" / "config", built / "catalog.git", bare),
    ):
        config.write_text(config.read_text().replace(f"= {old}\n", f"= {new}\n"))
    return bare


def _add_bare_remote(catalog: Path, bare: Path) -> None:
    git(bare.parent, "clone", "-q", "--bare", str(catalog), str(bare))
    git(catalog, "remote", "add", "origin", str(bare))
    git(catalog, "fetch", "-q", "origin")
    git(catalog, "branch", "-q", "--set-upstream-to=origin/main", "main")


_builds: list[Path] = []


def _built() -> Path:
    """The catalog checkout, its bare remote and the checkout's ``.git`` tracking it
    (``tracking.git``), made with Git once per test process and copied by the fixtures:
    seven Git processes a test, where hundreds of tests start from the same commit (the
    tests' Git identity and dates are pinned, so every build makes the same one)."""
    if not _builds:
        path = Path(tempfile.mkdtemp(prefix="reconciler-test-source-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        catalog = path / "catalog"
        catalog.mkdir()
        git(catalog, "init", "-q", "-b", "main")
        write_catalog(catalog)
        git(catalog, "add", "-A")
        git(catalog, "commit", "-q", "-m", "initial catalog")
        tracking = path / "tracking"
        shutil.copytree(catalog, tracking, symlinks=True)
        _add_bare_remote(tracking, path / "catalog.git")
        (tracking / ".git").rename(path / "tracking.git")
        git(path / "catalog.git", "config", "remote.origin.url", str(catalog))
        _builds.append(path)
    return _builds[0]


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
