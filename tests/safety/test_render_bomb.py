"""Issue 28, serious 1: a render bomb must not stop the cluster.

A 1 MB parameter default used 1,000 times in one manifest (or one anchored 1.9 MB
string aliased 10,000 times) made ``validate``, ``preview`` and ``run`` die in the
JSON encoder at 1-2 GB. Rendering now counts sizes before it builds anything:
an object over ``MAX_OBJECT_BYTES`` or an instance over ``MAX_INSTANCE_BYTES`` is
a validation error naming the manifest and the instance; that instance stays on
its last good state (``CatalogInvalid``), the others reconcile.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.catalog import YamlReadError, load_bounded, load_catalog
from reconciler.catalog.yamlread import MAX_ALIAS_CHARS, MAX_ALIAS_NODES
from reconciler.cli import main
from reconciler.daemon.plan import plan_cluster
from reconciler.model.changeset import ObjectRef
from reconciler.render import render_instance
from reconciler.render.render import MAX_INSTANCE_BYTES, MAX_OBJECT_BYTES
from tests.daemon.conftest import World
from tests.factories import write_catalog
from tests.safety.test_bounds import api_stalled_while_web_moves_on

VERSION = "apps/podinfo/versions/6.6.0/version.yaml"
BOMB = "apps/podinfo/versions/6.6.0/manifests/bomb.yaml"


def version_with(size: int) -> str:
    """6.6.0 (the version api runs) with a parameter ``big`` of ``size`` characters."""
    return (
        "apiVersion: reconciler/v1\nkind: AppVersion\napp: podinfo\nversion: 6.6.0\n"
        "images:\n  podinfo: ghcr.io/stefanprodan/podinfo:6.6.0\n"
        "parameters:\n  replicas: {default: 2}\n  message: {default: hello}\n"
        f"  big: {{default: {'x' * size}}}\n"
    )


def configmap(data: str, name: str = "${instance.name}-bomb") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{data}"


# the attack as reported: a 1 MB default used 1,000 times, as values and inside one string
MANY_VALUES = configmap("".join(f"  k{i}: ${{params.big}}\n" for i in range(1_000)))
ONE_STRING = configmap("  k: " + "${params.big}" * 1_000 + "\n")


@pytest.mark.parametrize("manifest", [MANY_VALUES, ONE_STRING], ids=["values", "one-string"])
def test_parameter_bomb_is_refused_before_it_is_built(tmp_path: Path, manifest: str) -> None:
    root = write_catalog(tmp_path / "catalog", {VERSION: version_with(1_000_000), BOMB: manifest})
    catalog = load_catalog(root)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    plans = {p.name: p for p in plan_cluster(catalog, "prod")}
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000  # the bomb is a gigabyte: it was never built
    api = plans["api"]
    assert api.reason == "CatalogInvalid"
    assert BOMB in api.message and "rendered for api" in api.message
    assert f"the limit is {MAX_OBJECT_BYTES:,}" in api.message
    assert plans["web"].ok


def test_object_just_over_the_bound_is_refused_and_under_it_renders(tmp_path: Path) -> None:
    assert MAX_OBJECT_BYTES == 1536 * 1024  # the API server's own limit (etcd's request size)
    over = write_catalog(
        tmp_path / "over",
        {VERSION: version_with(400_000), BOMB: configmap("  a: ${params.big}\n" * 1)},
    )
    # four uses of a 400 kB value: 1.6 MB, over; three: 1.2 MB, fine
    four = "".join(f"  k{i}: ${{params.big}}\n" for i in range(4))
    three = "".join(f"  k{i}: ${{params.big}}\n" for i in range(3))
    (over / BOMB).write_text(configmap(four))
    plans = {p.name: p for p in plan_cluster(load_catalog(over), "prod")}
    assert plans["api"].reason == "CatalogInvalid" and BOMB in plans["api"].message
    (over / BOMB).write_text(configmap(three))
    plans = {p.name: p for p in plan_cluster(load_catalog(over), "prod")}
    assert plans["api"].ok


def test_instance_bound_counts_every_object(tmp_path: Path) -> None:
    # each object is under the object bound; together they pass the instance bound
    per_object = 1_400_000
    count = MAX_INSTANCE_BYTES // per_object + 1
    docs = "---\n".join(
        configmap("  k: ${params.big}\n", name=f"${{instance.name}}-{i}") for i in range(count)
    )
    root = write_catalog(tmp_path / "c", {VERSION: version_with(per_object), BOMB: docs})
    catalog = load_catalog(root)
    api = catalog.clusters["prod"].instances["api"]
    version = catalog.apps["podinfo"].versions["6.6.0"]
    result = render_instance(catalog, api, version)
    assert not result.ok and not result.objects
    [problem] = [p for p in result.problems if p.is_error]
    assert problem.file == BOMB
    assert f"limit for one instance is {MAX_INSTANCE_BYTES:,}" in problem.message
    assert "rendered for api" in problem.message


def test_aliases_are_counted_when_rendering(tmp_path: Path) -> None:
    # 10 aliases of a 200 kB string: within the reader's alias bounds, a 2 MB object
    text = "x" * 200_000
    manifest = configmap(f"  a: &a {text}\n" + "".join(f"  k{i}: *a\n" for i in range(10)))
    root = write_catalog(tmp_path / "c", {BOMB: manifest})
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["api"].reason == "CatalogInvalid"
    assert "would be about" in plans["api"].message and BOMB in plans["api"].message
    assert plans["web"].ok


def test_an_anchored_string_aliased_ten_thousand_times_is_refused_at_read() -> None:
    big = "x" * 1_900_000
    text = f"a: &a {big}\nb: [" + ", ".join(["*a"] * 10_000) + "]\n"
    assert len(text) < 2 * 1024 * 1024  # under the file bound
    assert MAX_ALIAS_NODES >= 10_000  # and under the node bound: only characters catch it
    with pytest.raises(YamlReadError, match=r"aliases expand to [\d,]+ more characters") as info:
        load_bounded(text)
    assert info.value.line == 1
    assert load_bounded(f"a: &a {'y' * 1000}\nb: [*a, *a]\n")["b"] == ["y" * 1000] * 2
    assert MAX_ALIAS_CHARS == 2 * 1024 * 1024


def test_validate_names_the_file_and_the_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_catalog(tmp_path / "c", {VERSION: version_with(1_000_000), BOMB: ONE_STRING})
    assert main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert BOMB in out and "rendered for api" in out and "would be about" in out


def committed_catalog(tmp_path: Path) -> tuple[Path, Callable[..., None]]:
    """The baseline catalog committed in a new repository, and a ``git`` to run there."""
    root = write_catalog(tmp_path / "c")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "HOME": str(tmp_path)}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    return root, git


def test_preview_survives_the_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, git = committed_catalog(tmp_path)
    (root / VERSION).write_text(version_with(1_000_000))
    (root / BOMB).write_text(MANY_VALUES)
    git("add", "-A")
    git("commit", "-qm", "bomb")
    code = main(["preview", str(root), "--base", "HEAD~1"])
    out = capsys.readouterr().out
    assert code == 1
    assert BOMB in out and "rendered for api" in out


def test_daemon_keeps_the_bombed_instance_and_reconciles_the_others(world: World) -> None:
    assert world.daemon.run_pass().ok
    world.commit(VERSION, version_with(1_000_000), "a big parameter")
    world.commit(BOMB, MANY_VALUES, "a render bomb")
    assert BOMB in api_stalled_while_web_moves_on(world)
    api = world.client.get(ObjectRef("apps/v1", "Deployment", world.ns("team-api"), "api"))
    assert api is not None  # its last good state stays


def _preview_peak_kib(root: Path, base: str, head: str) -> tuple[int, str]:
    """Peak memory (KiB) of ``reconciler preview`` in its own process, and its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "preview", str(root), "--base", base, "--head", head],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped by wait4
    return usage.ru_maxrss, out


@pytest.mark.slow
def test_preview_never_reads_a_huge_file_whole(tmp_path: Path) -> None:
    root, git = committed_catalog(tmp_path)
    (root / "README.md").write_text("a change outside the catalog\n")
    git("add", "-A")
    git("commit", "-qm", "small")
    huge = root / "clusters/prod/instances/huge.yaml"
    with open(huge, "wb") as f:
        # zeros: cheap to store, 150 MB to read (far over the limit, and holding it twice
        # would still be 300 MB more than the baseline, three times the bound below)
        f.truncate(150 * 1024 * 1024)
    git("add", "-A")
    git("commit", "-qm", "huge")
    huge.unlink()
    baseline, _ = _preview_peak_kib(root, "HEAD~2", "HEAD~1")
    peak, out = _preview_peak_kib(root, "HEAD~1", "HEAD")
    assert "huge.yaml" in out and "file is too large (157286400 bytes" in out
    assert peak - baseline < 100 * 1024  # it used to hold the archive twice: 300 MB more
