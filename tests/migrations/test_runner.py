"""One step of a Python migration under a deadline: failures fail that migration only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.migrations import run_step
from tests.migrations import samples


@pytest.fixture
def release() -> Iterator[None]:
    samples.RELEASE.clear()
    yield
    samples.RELEASE.set()  # let an abandoned step finish


def test_a_step_that_raises_fails_with_its_message() -> None:
    out = run_step(samples.Raises(), "run", None, 5, name="m")
    assert not out.ok
    assert out.message.startswith(
        'python migration "m": run() raised RuntimeError: orders table is locked at samples.py:'
    )


def test_a_step_that_hangs_past_its_deadline_is_abandoned(release: None) -> None:
    out = run_step(samples.Hangs(), "run", None, 0.05, name="m")
    assert not out.ok and out.timed_out
    assert out.message == 'python migration "m": run() did not finish within 0.05s (abandoned)'


def test_needed_must_return_a_bool() -> None:
    out = run_step(samples.NotBool(), "needed", None, 5, name="m")
    assert not out.ok
    assert (
        out.message == "python migration \"m\": needed() must return True or False, got str 'yes'"
    )


def test_a_missing_step_and_an_unknown_step() -> None:
    out = run_step(samples.NotAMigration(), "undo", None, 5, name="m")
    assert (out.ok, out.message) == (False, 'python migration "m" has no undo(ctx)')
    with pytest.raises(ValueError, match="unknown migration step 'go'"):
        run_step(samples.NoUndo(), "go", None, 5)


def test_a_step_that_returns_is_ok_with_its_value() -> None:
    out = run_step(samples.NoUndo(), "needed", None, 5)
    assert out.ok and out.value is False and out.message == ""


def test_a_migration_logs_with_the_pass_id_of_its_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its step runs on a thread of its own, in a copy of the caller's context."""
    import logging

    from reconciler.daemon.logs import pass_scope

    class Logs:
        def run(self, ctx: object) -> None:
            logging.getLogger("reconciler.migrations.sample").warning("migrating")

    with pass_scope() as pass_id:
        assert run_step(Logs(), "run", None, 5, name="m").ok
    [record] = [r for r in caplog.records if r.getMessage() == "migrating"]
    assert getattr(record, "pass_id", None) == pass_id
