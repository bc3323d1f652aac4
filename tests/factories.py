"""Build small catalogs on disk for tests: a valid baseline plus per-test edits.

Tests write real files (so line numbers, symlinks and encodings are exercised
for real) and override or delete single files to produce one defect at a time.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import git

from reconciler.source import scaffold
from reconciler.source.runner import read_ref
from reconciler.source.scaffold import CatalogRepo, create_catalog_repo
from tests.lanes import suffix_namespaces, suffix_path

BASE_FILES: dict[str, str] = {
    "apps/podinfo/app.yaml": """\
        apiVersion: reconciler/v1
        kind: App
        name: podinfo
        description: Demo web service
        owners: [web-team@example.com]
        """,
    "apps/podinfo/channels.yaml": """\
        apiVersion: reconciler/v1
        kind: Channels
        app: podinfo
        channels:
          stable: 6.5.0
          fast: 6.6.0
        """,
    "apps/podinfo/versions/6.5.0/version.yaml": """\
        apiVersion: reconciler/v1
        kind: AppVersion
        app: podinfo
        version: 6.5.0
        images:
          podinfo: ghcr.io/stefanprodan/podinfo:6.5.0
        parameters:
          replicas: {default: 2}
          message: {default: hello}
        """,
    "apps/podinfo/versions/6.5.0/manifests/deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${instance.name}
        spec:
          replicas: ${params.replicas}
          selector:
            matchLabels:
              app.kubernetes.io/instance: ${instance.name}
          template:
            metadata:
              labels:
                app.kubernetes.io/instance: ${instance.name}
            spec:
              containers:
                - name: podinfo
                  image: ${images.podinfo}
                  env:
                    - name: PODINFO_UI_MESSAGE
                      value: "${params.message} from ${app.name} ${app.version}"
        """,
    "apps/podinfo/versions/6.6.0/version.yaml": """\
        apiVersion: reconciler/v1
        kind: AppVersion
        app: podinfo
        version: 6.6.0
        upgradeFrom: ">=6.0.0"
        images:
          podinfo: ghcr.io/stefanprodan/podinfo:6.6.0
        parameters:
          replicas: {default: 2}
          message: {default: hello}
        rollout:
          batches: [1, 50%, 50%]
        """,
    "apps/podinfo/versions/6.6.0/manifests/deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${instance.name}
        spec:
          replicas: ${params.replicas}
          selector:
            matchLabels:
              app.kubernetes.io/instance: ${instance.name}
          template:
            metadata:
              labels:
                app.kubernetes.io/instance: ${instance.name}
            spec:
              containers:
                - name: podinfo
                  image: ${images.podinfo}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: ${instance.name}-config
        data:
          message: ${params.message}
          script: echo $${HOME}
        """,
    "clusters/prod/cluster.yaml": """\
        apiVersion: reconciler/v1
        kind: Cluster
        name: prod
        allowedNamespaces: [web, "team-*"]
        allowClusterScoped: false
        """,
    "clusters/prod/instances/web.yaml": """\
        apiVersion: reconciler/v1
        kind: Instance
        name: web
        app: podinfo
        channel: stable
        namespace: web
        parameters: {replicas: 5}
        """,
    "clusters/prod/instances/api.yaml": """\
        apiVersion: reconciler/v1
        kind: Instance
        name: api
        app: podinfo
        version: ">=6.0.0 <7.0.0"
        namespace: team-api
        """,
}


# The podinfo Deployment template of the baseline, for tests that add objects next to it.
DEPLOYMENT_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${instance.name}
spec:
  replicas: ${params.replicas}
  selector:
    matchLabels:
      app.kubernetes.io/instance: ${instance.name}
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: ${instance.name}
    spec:
      containers:
        - name: podinfo
          image: ${images.podinfo}
"""


def write_catalog(
    root: Path, overrides: dict[str, str | bytes | None] | None = None, *, suffix: str = ""
) -> Path:
    """Write the baseline catalog under ``root`` with ``overrides`` applied.

    A ``str`` value replaces a file (dedented), ``bytes`` is written raw, and
    ``None`` deletes the file from the baseline. ``suffix`` ends every namespace
    and cluster name of the catalog (a test's own on a shared real cluster:
    ``clusters/prod/`` is written as ``clusters/prod<suffix>/``).
    """
    files: dict[str, str | bytes | None] = {k: v for k, v in BASE_FILES.items()}
    files.update(overrides or {})
    for rel, content in files.items():
        if content is None:
            continue
        path = root / suffix_path(rel, suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(suffix_namespaces(rel, textwrap.dedent(content), suffix))
    return root


_built: dict[str, Path] = {}  # catalog content -> where its repository was built
# a built repository's directories and files, read once: what each copy writes again
_Entry = tuple[str, str, bytes, int]  # (relative path, "d"/"f"/"l", bytes or link target, mode)
_entries: dict[Path, list[_Entry]] = {}


def catalog_repo(source: Path, into: Path) -> CatalogRepo:
    """What ``create_catalog_repo(source, into)`` makes, built once per catalog and copied.

    Hundreds of tests start from the same few catalogs; each build is a handful of Git
    processes (init, add, commit, a bare remote, a push). The copy has the same files,
    the same commit (the tests' Git identity and dates are pinned) and a clone whose
    ``origin`` is its own copy of the bare remote, as a fresh build would; the remote's
    objects (the clone's too: one store) are packed and neither has sample hooks, so a
    copy is a few dozen files.
    """
    key = _content_key(source)
    built = _built.get(key)
    if built is None:
        built = _templates() / key
        create_catalog_repo(source, built)
        # a copy of a few files, not of every loose object and sample hook: the same
        # history, packed as Git packs it; the inert *.sample hooks left out. The
        # clone's own objects are not copied (its copy uses the remote's), nor packed.
        remote = built / "catalog.git"
        subprocess.run(["git", "-C", str(remote), "repack", "-adq"], check=True)
        for sample in built.glob("**/hooks/*.sample"):
            sample.unlink()
        _built[key] = built
    work, remote = into / "catalog", into / "catalog.git"
    # the clone's own objects are not copied: its copy uses the remote's (below)
    _write_copy(built / "catalog", work, skip=".git/objects")
    _write_copy(built / "catalog.git", remote)
    # one object store for both (the same objects: the build pushed the clone's commit),
    # the remote's, so a clone of the remote is a plain local clone: what the clone
    # commits is in the remote at once, and ``commit_file`` below publishes a commit by
    # moving the remote's branch, where a ``git push`` was seven processes
    (work / ".git" / "objects").symlink_to(remote / "objects", target_is_directory=True)
    config = work / ".git" / "config"
    old, new = (built / "catalog.git").as_uri(), remote.as_uri()
    config.write_text(config.read_text().replace(old, new))
    return CatalogRepo(work, remote)


def commit_file(repo: CatalogRepo, rel: str, content: str, message: str) -> str:
    """``scaffold.commit_file`` (write, commit, publish; the new commit), published as
    ``publish`` does."""
    return publish(repo, lambda push: scaffold.commit_file(repo, rel, content, message, push=push))


def remove_file(repo: CatalogRepo, rel: str, message: str) -> str:
    """``scaffold.remove_file``, published as ``publish`` does."""
    return publish(repo, lambda push: scaffold.remove_file(repo, rel, message, push=push))


def publish(repo: CatalogRepo, commit: Callable[[bool], str]) -> str:
    """Make a commit in ``repo``'s clone (``commit(push)``) and move the remote's branch to it.

    What ``git push`` of a fast-forward leaves, without its processes (push, a shell,
    receive-pack, pack-objects, unpack-objects and the connectivity check's two: 17 ms
    of CPU each, a few hundred times over the suite): where clone and remote share one
    object store (``catalog_repo``) and the clone's branch, its remote-tracking ref and
    the remote's branch are one commit, the new commit on top is a fast-forward, and
    publishing it is writing the two refs the push would have moved. Anything else (a
    repository made otherwise, a detached or diverged clone) is pushed by Git.
    """
    branch = _fast_forward_branch(repo)
    head = commit(branch is None)
    if branch is not None:
        _write_ref(repo.remote, f"refs/heads/{branch}", head)
        _write_ref(repo.work / ".git", f"refs/remotes/origin/{branch}", head)
    return head


def _fast_forward_branch(repo: CatalogRepo) -> str | None:
    """The clone's branch when a commit on top of it is a fast-forward of the remote's,
    in the remote's own object store; None otherwise."""
    git_dir = repo.work / ".git"
    objects = git_dir / "objects"
    if not objects.is_symlink() or objects.resolve() != (repo.remote / "objects").resolve():
        return None
    target = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    branch = target.removeprefix("ref: refs/heads/")
    if branch == target:
        return None
    work, remote = git.Repo(str(repo.work)), git.Repo(str(repo.remote))
    head = read_ref(work, "HEAD")
    tracking = read_ref(work, f"refs/remotes/origin/{branch}")
    if head is None or head != tracking or head != read_ref(remote, f"refs/heads/{branch}"):
        return None
    return branch


def _write_ref(git_dir: Path, ref: str, commit: str) -> None:
    """A loose ref file, replaced at once (a reader sees the old or the new commit)."""
    path = git_dir / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".publish")
    temporary.write_text(commit + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _write_copy(source: Path, into: Path, skip: str | None = None) -> None:
    """What ``shutil.copytree(source, into, symlinks=True, copy_function=shutil.copy)``
    makes (the same directories, bytes, symlinks and permission bits), from the
    entries of ``source`` read the first time: a copy is a ``mkdir`` per directory and
    a write per file, where ``copytree`` read each file again and copied its mode and
    each directory's times and mode in more calls (a third of a daemon test's setup).
    ``skip``: a folder of ``source`` (relative, with ``/``) left out with what it holds;
    one source is always copied with the same ``skip``."""
    entries = _entries.get(source)
    if entries is None:
        entries = []
        for top, dirs, files in os.walk(source):
            base = Path(top)
            dirs[:] = sorted(d for d in dirs if (base / d).relative_to(source).as_posix() != skip)
            for name in [*dirs, *files]:
                path = base / name
                rel = path.relative_to(source).as_posix()
                mode = stat.S_IMODE(path.lstat().st_mode)
                if path.is_symlink():
                    entries.append((rel, "l", os.readlink(path).encode(), mode))
                elif path.is_dir():
                    entries.append((rel, "d", b"", mode))
            for name in sorted(files):
                path = base / name
                if not path.is_symlink():
                    rel = path.relative_to(source).as_posix()
                    entries.append((rel, "f", path.read_bytes(), stat.S_IMODE(path.stat().st_mode)))
        _entries[source] = entries
    into.mkdir(parents=True)
    dirs = [(into, stat.S_IMODE(source.stat().st_mode))]
    for rel, kind, data, mode in entries:
        path = os.path.join(into, rel)
        if kind == "d":
            os.mkdir(path)
            dirs.append((Path(path), mode))
        elif kind == "l":
            os.symlink(data.decode(), path)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)  # the source's bits, whatever the umask
            finally:
                os.close(fd)
    for path, mode in reversed(dirs):  # last, as copytree does: a read-only one too
        os.chmod(path, mode)


def _content_key(root: Path) -> str:
    """A digest of every file's path, mode and bytes (a symlink's target) under ``root``."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(f"L {rel} {os.readlink(path)}\0".encode())
        elif path.is_file():
            digest.update(f"F {rel} {path.stat().st_mode & 0o111}\0".encode())
            digest.update(path.read_bytes())
        else:
            digest.update(f"D {rel}\0".encode())
    return digest.hexdigest()[:16]


_templates_dir: list[Path] = []


def _templates() -> Path:
    if not _templates_dir:
        path = Path(tempfile.mkdtemp(prefix="reconciler-test-catalogs-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _templates_dir.append(path)
    return _templates_dir[0]
