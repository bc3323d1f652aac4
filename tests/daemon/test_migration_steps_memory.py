"""A pass's migration steps are freed by reference counting, not by the cycle collector."""

from __future__ import annotations

import gc
import weakref
from typing import Any, cast

from reconciler.daemon.migration_steps import MigrationSteps
from reconciler.kube import Limits
from reconciler.migrations.registry import Registry


def test_a_pass_s_migration_steps_are_freed_as_soon_as_the_pass_lets_go() -> None:
    """The daemon holds the cyclic collector off during a pass (``daemon.loop``): steps
    in a reference cycle would keep every instance's ledger and the pass's view of the
    cluster allocated until the pass ended."""
    nothing = cast(Any, None)  # neither the client nor the view is touched here
    steps = MigrationSteps(
        nothing, nothing, "dev", registry=Registry(), job_runner=nothing, limits=Limits()
    )
    gone = weakref.ref(steps)
    jobs = steps._jobs
    gc.disable()
    try:
        del steps
        assert gone() is None
    finally:
        gc.enable()
    # a Job runner outliving its pass says so instead of running a Job
    job = {"kind": "Job", "metadata": {"name": "m", "namespace": "shop"}}
    outcome = jobs.run_job(job, 1.0)
    assert not outcome.succeeded and "ended" in outcome.message
