"""Rendering copies a template at once and rewrites only its placeholder strings."""

from __future__ import annotations

from reconciler.model.catalog import Template
from reconciler.model.placeholders import placeholder_paths


def test_paths_name_each_string_holding_a_placeholder() -> None:
    data = {
        "kind": "ConfigMap",
        "metadata": {"name": "${instance.name}-cfg", "labels": {"a": "b"}},
        "data": {"plain": "x", "list": ["${params.one}", 3, {"deep": "$${escaped}"}]},
    }
    assert placeholder_paths(data) == (
        ("metadata", "name"),
        ("data", "list", 0),
        ("data", "list", 2, "deep"),
    )


def test_a_placeholder_in_a_key_means_walk_everything() -> None:
    assert placeholder_paths({"data": {"${instance.name}": "x"}}) is None
    assert placeholder_paths({"data": [{"k": "v"}], "n": 1}) == ()


def test_the_template_keeps_its_paths_and_its_data_unchanged() -> None:
    data = {"metadata": {"name": "${instance.name}"}}
    template = Template("m.yaml", 0, data)
    assert template.placeholder_paths == (("metadata", "name"),)
    assert template.placeholder_paths is template.placeholder_paths  # found once
    assert data == {"metadata": {"name": "${instance.name}"}}
