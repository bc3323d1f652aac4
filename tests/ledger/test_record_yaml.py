"""``dump_record`` writes exactly ``dump_status``'s bytes, on generated records."""

from __future__ import annotations

import random
from dataclasses import replace

from reconciler.model.rollout import BatchState, Replicas, RollingState, RolloutRecord
from reconciler.model.status import Condition, InstanceStatus, Phase
from reconciler.source.record_yaml import dump_record
from reconciler.status import dump_status, prepare_record

# words PyYAML quotes, reads as other types, escapes or folds, next to plain ones
TRICKY = [
    "",
    " ",
    "web",
    "inst-00007",
    "channel:stable",
    "a:",
    "a: b",
    "a :b",
    "x #y",
    "#x",
    "- x",
    "-x",
    "?x",
    "True",
    "true",
    "yes",
    "No",
    "ON",
    "null",
    "Null",
    "~",
    "yEs",
    "6.5.0",
    "6.5",
    "1e3",
    "0x1F",
    "007",
    ".inf",
    ".NaN",
    "2026-01-01T00:00:00Z",
    "2026-01-01",
    "<<",
    "=",
    "it's",
    'say "hi"',
    "tab\there",
    "line\nbreak",
    "trailing ",
    " leading",
    "ünïcödé «web»",
    "emoji \U0001f680",
    "nul\x00",
    "bell\x07",
    "{braces}",
    "[list]",
    "a,b",
    "&anchor",
    "*alias",
    "!tag",
    "|pipe",
    ">fold",
    "%pct",
    "@at",
    "`tick",
    "'quoted'",
    "x" * 99,
    "x" * 101,
    "y" * 130,
    "word " * 60,
    "word " * 300,
    "a:b:c",
    "a/b.c_d+e-f",
]
SCALARS: list[object] = [*TRICKY, 0, 1, -3, 12345678901234567890, True, False, None, 1.5, 1e300]


def _value(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return {str(rng.choice(TRICKY)): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if depth < 3 and roll < 0.3:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(SCALARS)


def _status(rng: random.Random) -> InstanceStatus:
    text = lambda: str(rng.choice(TRICKY))  # noqa: E731
    base = InstanceStatus(
        cluster="prod",
        instance=f"web-{rng.randint(0, 99)}",
        app=rng.choice(["podinfo", "true", "a: b"]),
        phase=rng.choice(list(Phase)),
        version=rng.choice([None, "6.5.0", "6.5", "1"]),
        desired_version=rng.choice([None, "6.6.0"]),
        source=text(),
        source_commit=rng.choice(["", "a" * 40, "1234567"]),
        objects=rng.randint(0, 10),
        reason=text(),
        message=text(),
        migrations=rng.choice(
            [None, (), ({"name": text(), "outcome": "Succeeded"},), ({text(): _value(rng)},)]
        ),
        extra={text(): _value(rng) for _ in range(rng.randint(0, 3))},
    )
    if rng.random() < 0.3:
        base = replace(
            base,
            rollout=RolloutRecord(
                from_version="6.5.0",
                to_version="6.6.0",
                state=RollingState.ROLLING,
                batches=3,
                batch=rng.randint(0, 3),
                batch_state=BatchState.VERIFYING,
                replicas=Replicas(desired=5, updated=3, ready=5),
                partition=2,
                started_at="2026-01-01T00:00:00Z",
                updated_at="2026-01-01T00:01:00Z",
                batch_started_at="2026-01-01T00:00:40Z",
            ),
        )
    if rng.random() < 0.5:
        base = replace(base, conditions=(Condition("Ready", "False", text(), text(), text()),))
    return prepare_record(base, None, now="2026-01-01T00:00:00Z").status


def test_generated_records_are_written_byte_for_byte_as_dump_status() -> None:
    rng = random.Random(7)
    for _ in range(1500):
        record = _status(rng)
        assert dump_record(record) == dump_status(record), record


def test_the_usual_record() -> None:
    record = prepare_record(
        InstanceStatus(cluster="prod", instance="web", app="podinfo", phase=Phase.READY),
        None,
        now="2026-01-01T00:00:00Z",
    ).status
    assert dump_record(record) == dump_status(record)
    assert dump_record(record).startswith(b"apiVersion: reconciler/v1\nkind: InstanceStatus\n")
