"""A migration Job is rendered like a manifest plus the RECONCILER_* environment (pure)."""

from __future__ import annotations

import json
import time

from reconciler.migrations import Component, MigrationContext, components_json, render_job
from reconciler.model.catalog import AppVersion, Instance, Parameter, Template
from reconciler.model.version import parse_version

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "${instance.name}-add-orders-index", "labels": {"team": "fin"}},
    "spec": {
        "activeDeadlineSeconds": 3600,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [{"name": "wait", "image": "${images.ledger}"}],
                "containers": [
                    {
                        "name": "migrate",
                        "image": "${images.ledger}",
                        "args": ["--batch", "${params.batch}"],
                        "env": [
                            {"name": "KEEP", "value": "me"},
                            {"name": "RECONCILER_PHASE", "value": "spoofed"},
                        ],
                    }
                ],
            }
        },
    },
}
VERSION = AppVersion(
    app="ledger",
    version=parse_version("2.0.0"),
    directory="apps/ledger/versions/2.0.0",
    images={"ledger": "ghcr.io/example/ledger:2.0.0"},
    parameters={"batch": Parameter("batch", default=500)},
)
INSTANCE = Instance(name="books", cluster="prod", app="ledger", namespace="fin")


def ctx(**overrides: object) -> MigrationContext:
    fields: dict[str, object] = {
        "client": None,
        "cluster": "prod",
        "instance": "books",
        "namespace": "fin",
        "app": "ledger",
        "from_version": "1.5.0",
        "to_version": "2.0.0",
        "phase": "pre",
        "migration": "add-orders-index",
        "deadline": time.monotonic() + 60,
        "components": (
            Component("books", "ledger", "1.5.0", "2.0.0"),
            Component("web", "podinfo", None, "6.6.0"),
        ),
        **overrides,
    }
    return MigrationContext(**fields)  # type: ignore[arg-type]


def test_job_is_rendered_with_placeholders_labels_namespace_and_environment() -> None:
    job, problems = render_job(Template("m.yaml", 0, JOB), INSTANCE, VERSION, ctx(), 300)
    assert problems == () and job is not None
    assert job["metadata"]["name"] == "books-add-orders-index"
    assert job["metadata"]["namespace"] == "fin"
    assert job["metadata"]["labels"] == {
        "team": "fin",
        "app.kubernetes.io/managed-by": "reconciler",
        "app.kubernetes.io/instance": "books",
        "app.kubernetes.io/name": "ledger",
        "app.kubernetes.io/version": "2.0.0",
        "reconciler.dev/migration": "add-orders-index",
        "reconciler.dev/migration-phase": "pre",
    }
    assert job["spec"]["activeDeadlineSeconds"] == 300  # capped by timeoutSeconds
    pod = job["spec"]["template"]["spec"]
    main = pod["containers"][0]
    assert main["image"] == "ghcr.io/example/ledger:2.0.0"
    assert main["args"] == ["--batch", 500]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env == {
        "KEEP": "me",
        "RECONCILER_CLUSTER": "prod",
        "RECONCILER_INSTANCE": "books",
        "RECONCILER_APP": "ledger",
        "RECONCILER_MIGRATION": "add-orders-index",
        "RECONCILER_PHASE": "pre",
        "RECONCILER_FROM_VERSION": "1.5.0",
        "RECONCILER_TO_VERSION": "2.0.0",
        "RECONCILER_COMPONENTS": components_json(ctx().components),
    }
    assert json.loads(env["RECONCILER_COMPONENTS"]) == [
        {"instance": "books", "app": "ledger", "from": "1.5.0", "to": "2.0.0"},
        {"instance": "web", "app": "podinfo", "from": None, "to": "6.6.0"},
    ]
    assert pod["initContainers"][0]["env"][0]["name"] == "RECONCILER_CLUSTER"
    assert JOB["metadata"]["name"] == "${instance.name}-add-orders-index"  # template untouched


def test_a_shorter_deadline_in_the_job_is_kept_and_a_first_install_has_no_from() -> None:
    short = {**JOB, "spec": {**JOB["spec"], "activeDeadlineSeconds": 60}}  # type: ignore[dict-item]
    job, _ = render_job(
        Template("m.yaml", 0, short), INSTANCE, VERSION, ctx(from_version=None), 300
    )
    assert job is not None and job["spec"]["activeDeadlineSeconds"] == 60
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RECONCILER_FROM_VERSION"] == ""


def test_a_job_that_cannot_render_reports_the_instance_problem() -> None:
    bad = Instance(
        name="books", cluster="prod", app="ledger", namespace="fin", parameters={"nope": 1}
    )
    job, problems = render_job(Template("m.yaml", 0, JOB), bad, VERSION, ctx(), 300)
    assert job is None
    assert 'unknown parameter "nope" for ledger 2.0.0' in problems[0].message
