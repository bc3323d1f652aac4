"""The incremental catalog reload equals a full load, whatever the edit.

Property test: random edits (versions, channels, instances, clusters, broken
and fixed YAML, stray files, symlinks) are committed to a real Git repository
one batch at a time; after each, ``reload_catalog`` of the previous catalog
with the paths ``git diff`` lists must equal ``load_catalog`` of the new tree:
the same apps, clusters and instances (in the same order) and the same
problems, file and line. The previous catalog of each step is the incremental
one, so an error would carry over and show up later.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.catalog.incremental import CatalogCache, FullReloadNeeded, reload_catalog
from reconciler.model.catalog import Catalog
from reconciler.source.changes import TreeState, changed_between, changed_since, tree_state
from tests.factories import write_catalog
from tests.source.servers import head

APPS = ("podinfo", "redis", "kafka", "web-ui")
CLUSTERS = ("prod", "stage", "dev")
VERSIONS = ("1.0.0", "1.1.0", "2.0.0", "2.0.0-rc.1", "6.5.0", "6.6.0", "bad_version")


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit(root: Path) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "edit")
    return head(root)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(textwrap.dedent(text))


def remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


class Editor:
    """Random edits of a catalog on disk, valid and broken ones alike."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.broken: dict[Path, str] = {}  # file -> its text before it was broken

    def pick(self, pattern: str) -> Path | None:
        found = sorted(self.root.glob(pattern))
        return self.rng.choice(found) if found else None

    def app(self) -> str:
        found = self.pick("apps/*/")
        return found.name if found is not None else self.rng.choice(APPS)

    def cluster(self) -> str:
        found = self.pick("clusters/*/")
        return found.name if found is not None else self.rng.choice(CLUSTERS)

    def edit(self) -> str:
        name = self.rng.choice([m for m in dir(self) if m.startswith("op_")])
        getattr(self, name)()
        return name

    def op_add_version(self) -> None:
        app, version = self.app(), self.rng.choice(VERSIONS)
        base = f"apps/{app}/versions/{version}"
        param = self.rng.choice(["replicas", "replicas", "typo"])
        extra = "yanked: true\n" if self.rng.random() < 0.2 else ""
        write(
            self.root,
            f"{base}/version.yaml",
            f"apiVersion: reconciler/v1\nkind: AppVersion\napp: {app}\nversion: {version}\n"
            f"images:\n  main: example.com/{app}:{version}\n"
            f"parameters:\n  replicas: {{default: 2}}\n{extra}",
        )
        if self.rng.random() < 0.9:
            write(
                self.root,
                f"{base}/manifests/app.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${instance.name}\n"
                f"data:\n  n: ${{params.{param}}}\n  image: ${{images.main}}\n",
            )

    def op_remove_version(self) -> None:
        found = self.pick("apps/*/versions/*")
        if found is not None:
            remove(found)

    def op_edit_version(self) -> None:
        found = self.pick("apps/*/versions/*/version.yaml")
        if found is None:
            return
        text = found.read_text()
        change = self.rng.choice(["yank", "image", "params", "version"])
        if change == "yank":
            text += "yanked: true\n" if "yanked" not in text else ""
        elif change == "image":
            text = text.replace("example.com", "registry.example.com")
        elif change == "params":
            text = text.replace("replicas: {default: 2}", "size: {default: 2}")
        else:
            text = text.replace("version: ", "version: 0.0.", 1)
        found.write_text(text)

    def op_set_channels(self) -> None:
        app = self.app()
        versions = [p.name for p in (self.root / "apps" / app / "versions").glob("*")]
        targets = [*versions, "9.9.9", "not a version"]
        lines = "".join(f"  {c}: {self.rng.choice(targets)}\n" for c in ("stable", "fast"))
        write(
            self.root,
            f"apps/{app}/channels.yaml",
            f"apiVersion: reconciler/v1\nkind: Channels\napp: {app}\nchannels:\n{lines}",
        )

    def op_break_yaml(self) -> None:
        found = self.pick("**/*.yaml")
        if found is None or found in self.broken or found.is_symlink():
            return
        text = found.read_text()
        self.broken[found] = text
        found.write_text(
            text + self.rng.choice(["key: [unclosed\n", "\tbad: tab\n", "a: 1\na: 2\n"])
        )

    def op_fix_yaml(self) -> None:
        if not self.broken:
            return
        path = self.rng.choice(sorted(self.broken))
        text = self.broken.pop(path)
        if path.parent.is_dir():
            path.write_text(text)

    def op_add_instance(self) -> None:
        cluster, app = self.cluster(), self.rng.choice([*APPS, "ghost"])
        name = self.rng.choice(["web", "api", "cache", "queue", "Bad_Name"])
        suffix = self.rng.choice([".yaml", ".yaml", ".yml"])
        selector = self.rng.choice(
            ["channel: stable", "version: latest", 'version: ">=1.0.0"', "channel: x\nversion: 1"]
        )
        write(
            self.root,
            f"clusters/{cluster}/instances/{name}{suffix}",
            f"apiVersion: reconciler/v1\nkind: Instance\nname: {name}\napp: {app}\n"
            f"{selector}\nnamespace: web\nparameters: {{replicas: {self.rng.randint(1, 9)}}}\n",
        )

    def op_remove_instance(self) -> None:
        found = self.pick("clusters/*/instances/*")
        if found is not None:
            remove(found)

    def op_edit_instance(self) -> None:
        found = self.pick("clusters/*/instances/*.y*ml")
        if found is None or found.is_symlink() or not found.is_file():
            return
        text = found.read_text()
        change = self.rng.choice(["params", "name", "namespace"])
        if change == "params":
            text = text.replace("replicas: ", "replicas: 1")
        elif change == "name":
            text = text.replace("name: ", "name: renamed-", 1)
        else:
            text = text.replace("namespace: ", "namespace: other-")
        found.write_text(text)

    def op_edit_cluster(self) -> None:
        cluster = self.cluster()
        namespaces = self.rng.choice(["[web]", '[web, "team-*"]', "web", "null"])
        write(
            self.root,
            f"clusters/{cluster}/cluster.yaml",
            f"apiVersion: reconciler/v1\nkind: Cluster\nname: {cluster}\n"
            f"allowedNamespaces: {namespaces}\nprune: {{maxRemovedInstances: 3}}\n",
        )

    def op_add_app(self) -> None:
        app = self.rng.choice(APPS)
        write(
            self.root,
            f"apps/{app}/app.yaml",
            f"apiVersion: reconciler/v1\nkind: App\nname: {app}\nowners: [a@example.com]\n",
        )
        self.op_add_version()

    def op_remove_app(self) -> None:
        found = self.pick("apps/*")
        if found is not None and self.rng.random() < 0.5:
            remove(found)

    def op_add_cluster(self) -> None:
        cluster = self.rng.choice(CLUSTERS)
        write(
            self.root,
            f"clusters/{cluster}/cluster.yaml",
            f"apiVersion: reconciler/v1\nkind: Cluster\nname: {cluster}\n",
        )
        self.op_add_instance()

    def op_remove_cluster(self) -> None:
        found = self.pick("clusters/*")
        if found is not None and self.rng.random() < 0.3:
            remove(found)

    def op_stray_file(self) -> None:
        rel = self.rng.choice(
            [
                "README.md",
                "docs/notes.yaml",
                "apps/notes.bak",
                "apps/README.md",
                f"apps/{self.app()}/extra.yaml",
                f"apps/{self.app()}/versions/NOTES.md",
                f"clusters/{self.cluster()}/instances/todo.txt",
                f"clusters/{self.cluster()}/instances/sub/x.yaml",
                f"clusters/{self.cluster()}/extra/x.yaml",
            ]
        )
        path = self.root / rel
        if path.exists() and self.rng.random() < 0.5:
            remove(path)
        else:
            write(self.root, rel, f"note: {self.rng.random()}\n")

    def op_instance_symlink(self) -> None:
        """An instance file that is a link to another: editing the target changes both."""
        target = self.pick("clusters/*/instances/*.yaml")
        if target is None or target.is_symlink():
            return
        link = target.parent / "alias.yaml"
        remove(link)
        link.symlink_to(target.name)


def same(incremental: Catalog, full: Catalog) -> None:
    assert incremental.problems == full.problems
    assert incremental.files_with_errors == full.files_with_errors
    assert list(incremental.apps) == list(full.apps)
    assert list(incremental.clusters) == list(full.clusters)
    for name, cluster in full.clusters.items():
        assert list(incremental.clusters[name].instances) == list(cluster.instances)
    assert incremental == full


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = write_catalog(tmp_path / "catalog")
    git(root, "init", "-q")
    commit(root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 3])
def test_random_commits_reload_to_what_a_full_load_gives(repo: Path, seed: int) -> None:
    rng = random.Random(seed)
    editor = Editor(repo, rng)
    head, previous = git(repo, "rev-parse", "HEAD"), load_catalog(repo)
    incremental = 0
    for step in range(25):
        ops = [editor.edit() for _ in range(rng.randint(1, 3))]
        new = commit(repo)
        full = load_catalog(repo)
        try:
            reloaded = reload_catalog(previous, repo, changed_between(repo, head, new))
            incremental += 1
        except FullReloadNeeded:
            reloaded = full
        try:
            same(reloaded, full)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} step {step} after {ops}: {e}") from e
        head, previous = new, reloaded
    assert incremental >= 20  # the fallback is the exception, not the rule


@pytest.mark.slow
def test_working_tree_edits_reload_to_what_a_full_load_gives(repo: Path) -> None:
    """``--watch``: edits are seen without commits, and commits on top of them."""
    rng = random.Random(7)
    editor = Editor(repo, rng)
    cache = CatalogCache[TreeState](changed_since)
    head = git(repo, "rev-parse", "HEAD")
    cache.load(repo, tree_state(repo, head, worktree=True))
    for step in range(25):
        ops = [editor.edit() for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.3:
            head = commit(repo)
        reloaded = cache.load(repo, tree_state(repo, head, worktree=True))
        try:
            same(reloaded, load_catalog(repo))
        except AssertionError as e:
            raise AssertionError(f"step {step} after {ops}: {e}") from e
    assert cache.full_loads == 1 and cache.incremental_loads == 25


def test_an_edit_to_one_app_keeps_every_other_object(repo: Path) -> None:
    for app in ("alpha", "beta"):
        write(repo, f"apps/{app}/app.yaml", f"apiVersion: reconciler/v1\nkind: App\nname: {app}\n")
    old_head = commit(repo)
    previous = load_catalog(repo)
    version = repo / "apps/podinfo/versions/6.6.0/version.yaml"
    version.write_text(version.read_text().replace("6.6.0\n", "6.6.1\n"))
    new_head = commit(repo)
    changed = changed_between(repo, old_head, new_head)
    assert changed == {"apps/podinfo/versions/6.6.0/version.yaml"}
    reloaded = reload_catalog(previous, repo, changed)
    same(reloaded, load_catalog(repo))
    assert reloaded.apps["podinfo"] is not previous.apps["podinfo"]
    assert not reloaded.apps["podinfo"].versions["6.6.0"].valid
    for app in ("alpha", "beta"):
        assert reloaded.apps[app] is previous.apps[app]
    assert reloaded.clusters["prod"] is previous.clusters["prod"]


def test_an_edit_to_one_instance_reads_only_that_instance(repo: Path) -> None:
    old_head = git(repo, "rev-parse", "HEAD")
    previous = load_catalog(repo)
    web = repo / "clusters/prod/instances/web.yaml"
    web.write_text(web.read_text().replace("replicas: 5", "replicas: 6"))
    reloaded = reload_catalog(previous, repo, changed_between(repo, old_head, commit(repo)))
    same(reloaded, load_catalog(repo))
    prod, before = reloaded.clusters["prod"], previous.clusters["prod"]
    assert prod.instances["web"].parameters == {"replicas": 6}
    assert prod.instances["api"] is before.instances["api"]
    assert reloaded.apps["podinfo"] is previous.apps["podinfo"]


def test_a_symlinked_app_directory_is_loaded_whole(repo: Path) -> None:
    """``apps/alias -> podinfo`` would change with podinfo unseen; no shortcut then."""
    (repo / "apps/alias").symlink_to("podinfo")
    head = commit(repo)
    cache = CatalogCache[TreeState](changed_since)
    cache.load(repo, TreeState(head))
    version = repo / "apps/podinfo/versions/6.6.0/version.yaml"
    version.write_text(version.read_text() + "yanked: true\n")
    new = commit(repo)
    with pytest.raises(FullReloadNeeded):
        reload_catalog(load_catalog(repo), repo, changed_between(repo, head, new))
    same(cache.load(repo, TreeState(new)), load_catalog(repo))
    assert cache.full_loads == 2 and cache.incremental_loads == 0


def test_an_unknown_commit_falls_back_to_a_full_load(repo: Path) -> None:
    cache = CatalogCache[TreeState](changed_since)
    cache.load(repo, TreeState("0" * 40))  # e.g. gone from a shallow clone
    web = repo / "clusters/prod/instances/web.yaml"
    web.write_text(web.read_text().replace("replicas: 5", "replicas: 6"))
    head = commit(repo)
    same(cache.load(repo, TreeState(head)), load_catalog(repo))
    assert cache.full_loads == 2


def test_an_instance_naming_an_analysis_job_is_loaded_whole(repo: Path) -> None:
    """The instance reads ``rollout.analysis`` from its app's versions: an edit to that
    file under ``apps/`` changes what the instance means, so no shortcut then."""
    write(
        repo,
        "apps/podinfo/versions/6.6.0/checks/smoke.yaml",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: smoke\nspec:\n  template:\n"
        "    spec:\n      restartPolicy: Never\n      containers:\n"
        "        - {name: smoke, image: busybox}\n",
    )
    web = repo / "clusters/prod/instances/web.yaml"
    web.write_text(web.read_text() + "rollout:\n  analysis: checks/smoke.yaml\n")
    head = commit(repo)
    previous = load_catalog(repo)
    remove(repo / "apps/podinfo/versions/6.6.0/checks/smoke.yaml")
    new = commit(repo)
    with pytest.raises(FullReloadNeeded):
        reload_catalog(previous, repo, changed_between(repo, head, new))
    full = load_catalog(repo)
    assert any("rollout analysis job" in p.message for p in full.problems)
