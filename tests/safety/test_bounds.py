"""Issue 8, "one file never stops the fleet": YAML is bounded at read time.

A 494-byte alias bomb took 132 s and 4 GB to render; ~1,200-deep nesting raised
RecursionError; a 5,000-digit number raised ValueError; the daemon logged "pass
crashed" forever. SPEC section 3: alias expansion, nesting depth, number size
and file size are bounded; an over-limit file is an error on that file, its
instance is ``CatalogInvalid``, every other instance keeps reconciling. The
same holds for hand-edited status files on the status branch.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from reconciler.catalog import YamlReadError, load_bounded, load_catalog
from reconciler.catalog.yamlread import MAX_ALIAS_NODES, MAX_DEPTH
from reconciler.cli import main
from reconciler.daemon.metrics import DaemonMetrics
from reconciler.daemon.plan import plan_cluster
from reconciler.model.changeset import ObjectRef
from reconciler.model.status import Phase
from tests.daemon.conftest import World
from tests.factories import write_catalog

LAUGHS = "".join(
    f"  {name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefg"], "abcdefgh", strict=True)
)
BOMB = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\ndata:\n{LAUGHS}"


def deep(levels: int) -> str:
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata:\n  x: " + (
        "[" * levels + "]" * levels + "\n"
    )


def test_alias_bomb_is_refused_at_once() -> None:
    assert len(BOMB.encode()) < 700
    started = time.process_time()
    with pytest.raises(YamlReadError, match=r"aliases expand to [\d,]+ more nodes; the limit is"):
        load_bounded(BOMB)
    assert time.process_time() - started < 5  # generous: expanding it takes minutes


def test_modest_aliases_are_fine() -> None:
    text = "base: &b {a: 1, b: 2}\nx: *b\ny: *b\n"
    assert load_bounded(text) == {
        "base": {"a": 1, "b": 2},
        "x": {"a": 1, "b": 2},
        "y": {"a": 1, "b": 2},
    }
    assert MAX_ALIAS_NODES >= 1000


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_200, 200_000])
def test_deep_nesting_is_refused_without_crashing(levels: int) -> None:
    # 200,000 levels used to crash libyaml's C composer (a segfault, not an exception)
    with pytest.raises(YamlReadError, match=f"nested more than {MAX_DEPTH} levels"):
        load_bounded(deep(levels))


def test_nesting_within_the_limit_is_fine() -> None:
    assert load_bounded(deep(MAX_DEPTH - 5)) is not None


def test_huge_numbers_are_refused_with_their_line() -> None:
    with pytest.raises(YamlReadError) as info:
        load_bounded("a: 1\nb: " + "9" * 5000 + "\n")
    assert info.value.line == 2
    assert "number has 5000 characters" in info.value.message
    assert load_bounded(f'b: "{"9" * 5000}"\n') == {"b": "9" * 5000}


@pytest.mark.parametrize(
    ("rel", "text", "needle"),
    [
        ("apps/podinfo/versions/6.6.0/manifests/bomb.yaml", BOMB, "aliases expand"),
        ("apps/podinfo/versions/6.6.0/manifests/deep.yaml", deep(1_200), "nested more than"),
        (
            "clusters/prod/instances/api.yaml",
            "apiVersion: reconciler/v1\nkind: Instance\nname: api\napp: podinfo\n"
            'version: ">=6.0.0 <7.0.0"\nnamespace: team-api\nextra: ' + "9" * 5000 + "\n",
            "number has 5000 characters",
        ),
    ],
)
def test_over_limit_file_is_a_named_error_and_others_still_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rel: str, text: str, needle: str
) -> None:
    root = write_catalog(tmp_path / "catalog", {rel: text})
    assert main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{rel}:" in out and needle in out
    plans = {p.name: p for p in plan_cluster(load_catalog(root), "prod")}
    assert plans["api"].reason == "CatalogInvalid"
    assert plans["web"].ok  # web (6.5.0) does not read the broken file
    assert main(["render", str(root), "--cluster", "prod"]) == 1
    out = capsys.readouterr().out
    assert "# instance: web" in out


def test_daemon_keeps_reconciling_the_others(world: World) -> None:
    assert world.daemon.run_pass().ok
    world.commit("apps/podinfo/versions/6.6.0/manifests/bomb.yaml", BOMB, "a bomb")
    assert "bomb.yaml" in api_stalled_while_web_moves_on(world)


def api_stalled_while_web_moves_on(world: World) -> str:
    """Move web to 3 replicas and run a pass: api must be CatalogInvalid, web must move.

    Returns api's status message (which should name the broken file).
    """
    world.commit(
        "clusters/prod/instances/web.yaml",
        "apiVersion: reconciler/v1\nkind: Instance\nname: web\napp: podinfo\n"
        "channel: stable\nnamespace: web\nparameters: {replicas: 3}\n",
        "web to 3 replicas",
    )
    outcome = world.daemon.run_pass()
    assert outcome.report is not None and outcome.error is None
    statuses = {s.instance: s for s in outcome.report.statuses}
    assert statuses["api"].phase is Phase.STALLED and statuses["api"].reason == "CatalogInvalid"
    web = world.client.get(ObjectRef("apps/v1", "Deployment", world.ns("web"), "web"))
    assert web is not None and web["spec"]["replicas"] == 3  # the other instance moved on
    return statuses["api"].message


def _poison_status_branch(world: World, tmp_path: Path) -> None:
    clone = tmp_path / "status-clone"
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=clone, check=True, env=env, capture_output=True)

    subprocess.run(
        ["git", "clone", "-q", "-b", "status/prod", str(world.repo.remote), str(clone)],
        check=True,
        env=env,
        capture_output=True,
    )
    (clone / "instances/web.yaml").write_text(LAUGHS.replace("  ", "", 1).replace("\n  ", "\n"))
    git("commit", "-qam", "hand-made status file")
    git("push", "-q", "origin", "status/prod")


def test_poisoned_status_record_is_reported_and_rewritten(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert world.daemon.run_pass().ok
    _poison_status_branch(world, tmp_path)

    code = main(["status", "--repo", str(world.repo.remote), "--cluster", "prod"])
    captured = capsys.readouterr()
    assert "api" in captured.out  # the other records still show
    assert "instances/web.yaml" in captured.err and "aliases expand" in captured.err
    assert code in (0, 1)

    outcome = world.new_daemon().run_pass()
    assert outcome.error is None
    assert [c.instance for c in outcome.commits] == ["web"]  # rewritten, nothing else
    assert world.daemon.ledger.read()["web"].phase is Phase.READY


def test_crashed_pass_is_counted_and_last_success_exists_from_start() -> None:
    metrics = DaemonMetrics(clock=lambda: 1_000.0)
    metrics.start("prod")
    text = generate_latest(metrics.registry).decode()
    assert 'reconciler_last_successful_pass_timestamp_seconds{cluster="prod"} 1000.0' in text
    assert 'reconciler_passes_total{cluster="prod",result="error"} 0.0' in text
    metrics.observe_pass("prod", 0.1, ok=False, crashed=True)
    text = generate_latest(metrics.registry).decode()
    assert 'reconciler_passes_total{cluster="prod",result="error"} 1.0' in text
