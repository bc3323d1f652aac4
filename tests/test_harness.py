"""tests/conftest.py's harness: temporary folders on a memory file system when there is
one, a ``tmp_path`` per test as pytest's own gives it, and the collector's settings."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import COLLECTOR_THRESHOLDS, use_memory_temp


@pytest.fixture
def restored_tempdir() -> Iterator[None]:
    """``use_memory_temp`` resets tempfile's cached folder: give it back after."""
    saved = tempfile.tempdir
    yield
    tempfile.tempdir = saved


@pytest.mark.usefixtures("restored_tempdir")
def test_an_unset_run_gets_its_own_folder_on_the_memory_file_system(tmp_path: Path) -> None:
    environ: dict[str, str] = {"PATH": "/usr/bin"}
    root = use_memory_temp(environ, tmp_path, min_free=0)
    assert root == tmp_path / f"reconciler-tests-{os.getuid()}"
    assert root.is_dir() and (root.stat().st_mode & 0o777) == 0o700
    assert environ == {"PATH": "/usr/bin", "TMPDIR": str(root), "PYTEST_DEBUG_TEMPROOT": str(root)}
    # a second run (an xdist worker, the next session) uses the same folder
    assert use_memory_temp({}, tmp_path, min_free=0) == root


@pytest.mark.usefixtures("restored_tempdir")
@pytest.mark.parametrize("chosen", ["TMPDIR", "PYTEST_DEBUG_TEMPROOT"])
def test_a_folder_the_user_chose_is_kept(tmp_path: Path, chosen: str) -> None:
    environ = {chosen: "/somewhere"}
    assert use_memory_temp(environ, tmp_path, min_free=0) is None
    assert environ == {chosen: "/somewhere"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("restored_tempdir")
def test_without_a_memory_file_system_the_default_stays(tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    assert use_memory_temp(environ, tmp_path / "absent", min_free=0) is None
    (tmp_path / "file").write_text("")
    assert use_memory_temp(environ, tmp_path / "file", min_free=0) is None
    assert environ == {}


@pytest.mark.usefixtures("restored_tempdir")
def test_a_memory_file_system_with_too_little_room_keeps_the_default(tmp_path: Path) -> None:
    """A container's /dev/shm is often 64 MiB: the suite's folders would fill it."""
    free = os.statvfs(tmp_path)
    room = free.f_bavail * free.f_frsize
    environ: dict[str, str] = {}
    assert use_memory_temp(environ, tmp_path, min_free=room + (1 << 40)) is None
    assert environ == {} and list(tmp_path.iterdir()) == []
    assert use_memory_temp(environ, tmp_path, min_free=min(room, 1 << 20)) is not None


@pytest.mark.usefixtures("restored_tempdir")
def test_a_folder_it_cannot_make_there_keeps_the_default(tmp_path: Path) -> None:
    (tmp_path / f"reconciler-tests-{os.getuid()}").write_text("a file, not a folder")
    environ: dict[str, str] = {}
    assert use_memory_temp(environ, tmp_path, min_free=0) is None
    assert environ == {}


@pytest.mark.parametrize("n", range(3))
def test_each_test_has_a_new_empty_tmp_path_under_the_runs_base_folder(
    n: int, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []
    assert tmp_path.parent == tmp_path_factory.getbasetemp()
    assert tmp_path.name.startswith("test_each_test_has_a_new_empt")
    assert (tmp_path.stat().st_mode & 0o777) == 0o700
    # a file left here must not show up in the next test's folder
    (tmp_path / "left").write_text(str(n))


def test_two_tmp_paths_of_one_name_are_apart(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    other = request.getfixturevalue("tmp_path")
    assert other == tmp_path  # one per test
    siblings = [
        p
        for p in tmp_path_factory.getbasetemp().iterdir()
        if p.name.startswith("test_two_tmp_paths_of_one_name-")  # not test_two_revisions...
    ]
    assert siblings == [tmp_path]


def test_tests_run_with_the_collected_heap_frozen_and_fewer_collections() -> None:
    assert gc.isenabled()
    assert gc.get_threshold() == COLLECTOR_THRESHOLDS
    assert gc.get_freeze_count() > 0
