"""``reconciler report`` through the real entry point, from status branches in real Git."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from reconciler.cli import main
from reconciler.source import status_branch_clusters
from reconciler.status.report import instance_page
from tests.report.conftest import EVIL_MESSAGE, EVIL_NAME


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_finds_every_status_branch_and_writes_a_page_per_instance(
    status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    code, out, err = run(capsys, "report", "--repo", status_remote.as_uri(), "--html", str(site))
    # a hand-pushed file that is not a record: the pages are written and name it, exit 1
    assert code == 1
    assert "instances/broken.yaml" in err
    assert f"open {site / 'index.html'}" in out
    assert "2 clusters, 4 instances" in out
    index = (site / "index.html").read_text()
    assert index.index('data-cluster="prod"') < index.index('data-cluster="staging"')
    for cluster, instance in [("prod", "web"), ("prod", "api"), ("staging", "web")]:
        assert (site / instance_page(cluster, instance)).is_file()
        assert f'href="{instance_page(cluster, instance)}"' in index
    evil_page = site / instance_page("prod", EVIL_NAME)
    assert evil_page.parent == site / "prod" and evil_page.is_file()  # a slug, on disk too
    assert "instances/broken.yaml" in index  # the page names the unreadable file


def test_nothing_from_git_reaches_the_pages_as_markup(
    status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    run(capsys, "report", "--repo", status_remote.as_uri(), "--html", str(site))
    pages = {p: p.read_text() for p in site.rglob("*.html")}
    for path, text in pages.items():
        assert "<script" not in text, path
        assert "<img" not in text and "<br>" not in text and "<b>" not in text, path
        assert 'http-equiv="Content-Security-Policy"' in text
    assert html.escape(EVIL_MESSAGE) in (site / instance_page("prod", "api")).read_text()
    evil = (site / instance_page("prod", EVIL_NAME)).read_text()
    assert f'<h1 id="instance">{html.escape(EVIL_NAME)} ' in evil


def test_chosen_clusters_in_the_order_given_and_a_branch_not_written_yet(
    status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    repo = status_remote.as_uri()
    code, out, _ = run(
        capsys, "report", "--repo", repo, "--cluster", "staging,dev", "--html", str(site)
    )
    assert code == 0, out
    index = (site / "index.html").read_text()
    headers = re.findall(r'<th scope="col" data-cluster="([^"]+)"', index)
    assert headers == ["staging", "dev"]
    assert "no branch status/dev yet" in index
    assert not (site / "prod").exists()


def test_usage_errors(
    status_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = status_remote.as_uri()
    site = str(tmp_path / "site")
    code, _, err = run(capsys, "report", "--repo", repo, "--status-branch", "s/x", "--html", site)
    assert code == 2 and "exactly one --cluster" in err
    code, _, err = run(capsys, "report", "--repo", repo, "--history-limit", "-1", "--html", site)
    assert code == 2 and "--history-limit" in err


def test_status_branch_clusters_lists_only_status_branches(status_remote: Path) -> None:
    from tests.source.servers import git

    git(status_remote, "branch", "status/a/b", "status/prod")  # not status/<cluster>
    git(status_remote, "branch", "main", "status/prod")
    assert status_branch_clusters(status_remote.as_uri()) == ["prod", "staging"]
    assert status_branch_clusters(str(status_remote)) == ["prod", "staging"]


def test_a_repository_without_status_branches_gets_an_empty_page_and_a_hint(
    remotes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.source.servers import git

    bare = remotes / "empty.git"
    git(remotes, "init", "-q", "--bare", str(bare))
    site = tmp_path / "site"
    code, out, err = run(capsys, "report", "--repo", str(bare), "--html", str(site))
    assert code == 0 and "0 clusters, 0 instances" in out
    assert "origin/status/*" in err
    assert "No cluster: no status branch found." in (site / "index.html").read_text()
