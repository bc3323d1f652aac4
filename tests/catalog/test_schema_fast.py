"""The fast schema validator accepts exactly what the schemas as written accept.

Its ``oneOf`` choices between types are merged into one schema for speed
(``schema._merge_type_choices``); these compare its verdicts with jsonschema's on the
schemas as written, for values on both sides of every merged bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from reconciler.catalog.schema import SCHEMA_FILES, _fast_validator, load_schema

BATCHES = [1, 3, 0, -1, "50%", "100%", "0%", "101%", "5", "", 2.5, True, None, [1], {"a": 1}]
LIMITS = [0, 5, -1, "50%", "0%", "100%", "101%", "x", 1.5, False]


def fast_accepts(kind: str, data: Any) -> bool:
    try:
        _fast_validator(kind)(data)
    except Exception:  # fastjsonschema's JsonSchemaException and its subclasses
        return False
    return True


def full_accepts(kind: str, data: Any) -> bool:
    return jsonschema.validators.validator_for(load_schema(kind))(load_schema(kind)).is_valid(data)


def version(batch: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconciler/v1",
        "kind": "AppVersion",
        "app": "web",
        "version": "1.0.0",
        "rollout": {"batches": [batch]},
    }


def cluster(limit: Any) -> dict[str, Any]:
    return {
        "apiVersion": "reconciler/v1",
        "kind": "Cluster",
        "name": "prod",
        "prune": {"maxRemovedInstances": limit},
    }


@pytest.mark.parametrize("batch", BATCHES)
def test_a_batch_is_judged_as_the_schema_says(batch: Any) -> None:
    assert fast_accepts("AppVersion", version(batch)) == full_accepts("AppVersion", version(batch))


@pytest.mark.parametrize("limit", LIMITS)
def test_a_prune_limit_is_judged_as_the_schema_says(limit: Any) -> None:
    assert fast_accepts("Cluster", cluster(limit)) == full_accepts("Cluster", cluster(limit))


def test_the_samples_cover_both_verdicts() -> None:
    verdicts = {full_accepts("AppVersion", version(b)) for b in BATCHES}
    assert verdicts == {True, False}
    assert {full_accepts("Cluster", cluster(x)) for x in LIMITS} == {True, False}


@pytest.mark.parametrize("kind", sorted(SCHEMA_FILES))
def test_every_schema_compiles_for_the_fast_path(kind: str) -> None:
    assert callable(_fast_validator(kind))


CHECK_IN_A_FRESH_PROCESS = """\
import json, sys
from reconciler.catalog.schema import check_document
verdicts = [check_document("AppVersion", doc) for doc in json.loads(sys.argv[1])]
print(json.dumps({"imported": "jsonschema" in sys.modules,
                  "messages": [[v.message for v in found] for found in verdicts]}))
"""


@pytest.mark.parametrize(
    ("docs", "imported"),
    [([version(1), version("50%")], False), ([version(1), version("101%")], True)],
    ids=["valid documents", "an invalid one"],
)
def test_jsonschema_is_imported_only_to_explain_a_failure(
    docs: list[dict[str, Any]], imported: bool
) -> None:
    """Valid documents are answered by the fast validator alone: a process that loads a
    valid catalog never imports ``jsonschema`` (0.07 s of CPU at each start of a
    daemon, ``validate`` or ``preview``). A failure imports it and is still explained
    field by field. In a fresh interpreter: this one has imported jsonschema already."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IN_A_FRESH_PROCESS, json.dumps(docs)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["imported"] is imported
    assert result["messages"][0] == []
    if imported:
        assert result["messages"][1] and "rollout.batches[0]" in result["messages"][1][0]
    else:
        assert result["messages"][1] == []
