"""``apply --wait``: after the pass, wait until every applied instance is healthy.

Like ``flux reconcile`` or ``argocd app wait``: one line per instance saying how
it ended (healthy, failed, timed out). On a terminal the line of the instance
being waited for is redrawn in place with its progress (objects ready out of
all, the first one still pending), prefixed ``[i/n]`` so a long pass shows how
far it got. Off a terminal (CI logs, pipes) only the final lines are printed,
so a log holds no carriage returns. Health is judged by ``kube.wait_healthy``,
the same rules the daemon uses; the deadline is shared by all instances.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

from reconciler.commands.output import Style, raw
from reconciler.daemon.plan import InstancePlan
from reconciler.kube import Health, HealthReport, InstanceResult, KubeClient, wait_healthy
from reconciler.model.changeset import ObjectRef

# back to the line's start and erase it: a progress line redrawn in place
_REDRAW = "\r\x1b[K"


def wait_for_instances(
    client: KubeClient,
    plans: Sequence[InstancePlan],
    results: Sequence[InstanceResult],
    timeout: float,
    out: TextIO,
    *,
    style: Style,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> list[HealthReport | None]:
    """One report per plan (None: not waited for: failed, suspended or not planned)."""
    waited = [
        i
        for i, (plan, result) in enumerate(zip(plans, results, strict=True))
        if result.ok and plan.ok and not plan.instance.suspend and plan.objects
    ]
    reports: list[HealthReport | None] = [None] * len(plans)
    deadline = clock() + timeout
    live = _isatty(out)
    for n, i in enumerate(waited, start=1):
        plan = plans[i]
        prefix = f"[{n}/{len(waited)}] " if live else ""
        started = clock()
        draw = _drawer(out, f"{prefix}{plan.name}", started, clock) if live else None
        refs = [ObjectRef.of(obj) for obj in plan.objects]
        report = wait_healthy(
            client,
            refs,
            max(0.0, deadline - clock()),
            interval=interval,
            clock=clock,
            progress=draw,
        )
        reports[i] = report
        if live:
            raw(out).write(_REDRAW)  # ours, past the escaping of catalog text
        out.write(f"{prefix}{_verdict(plan.name, report, clock() - started, style)}\n")
        out.flush()
    return reports


def _drawer(
    out: TextIO, label: str, started: float, clock: Callable[[], float]
) -> Callable[[HealthReport], None]:
    def draw(report: HealthReport) -> None:
        ready = sum(1 for o in report.objects if o.health is Health.CURRENT)
        pending = report.pending
        detail = f" ({pending[0]})" if pending else ""
        line = f"{label}: waiting, {ready}/{len(report.objects)} ready{detail}"
        raw(out).write(_REDRAW)
        out.write(f"{line[:160]} {clock() - started:.0f}s")
        out.flush()

    return draw


def _verdict(name: str, report: HealthReport, took: float, style: Style) -> str:
    if report.healthy:
        count = len(report.objects)
        objects = "1 object" if count == 1 else f"{count} objects"
        return f"{name}: {style.word('Ready')} ({objects} healthy, {took:.1f}s)"
    word = "Failed" if report.failed else "Progressing"
    return f"{name}: {style.word(word)}: {report.message()}"


def _isatty(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())
