"""``deploy/monitoring/``: the monitors, alert rules and dashboard parse and name real metrics.

Every PromQL expression (alert rules, dashboard panels) is parsed by
``tests/deploy/promql.py``, and every metric, label and enumerated label value
it names is checked against the daemon's own registry (``DaemonMetrics``): a
renamed metric or a typo in a label value fails here, not silently in
Prometheus. The dashboard is checked for what Grafana needs to import it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from reconciler.daemon.metrics import (
    HEALTH_WAIT_OUTCOMES,
    INSTANCE_INFO_LABELS,
    MIGRATION_OUTCOMES,
    PASS_RESULTS,
    DaemonMetrics,
    InstanceInfo,
)
from reconciler.model.rollout import RollingState
from reconciler.model.status import Phase
from tests.conftest import REPO_ROOT
from tests.deploy.promql import PromQLError, Selector, parse

MONITORING = REPO_ROOT / "deploy" / "monitoring"
DEPLOY = REPO_ROOT / "deploy"
# labels Prometheus adds to every series of a PodMonitor/ServiceMonitor target
TARGET_LABELS = {"namespace", "pod", "job", "instance", "container", "endpoint", "service"}
# the reasons the rules and dashboard select instances by (reconciler.daemon.rolling)
GATE_REASONS = {"WaitingForPromotion", "RolloutPaused", "Progressing"}


def load(name: str) -> Any:
    return yaml.safe_load((MONITORING / name).read_text())


def labels_by_metric() -> dict[str, set[str]]:
    """Each series name the daemon can expose, with the labels it carries."""
    metrics = DaemonMetrics()
    found: dict[str, set[str]] = {name: set() for name in metrics.metric_names()}
    for value in vars(metrics).values():
        if isinstance(value, InstanceInfo):  # built when scraped: no series until a pass
            found[value.NAME] |= set(INSTANCE_INFO_LABELS)
            continue
        if not isinstance(value, MetricWrapperBase):
            continue
        base = value._name
        labels = set(value._labelnames)
        for name in found:
            if name == base or (name.startswith(base + "_") and name != base):
                found[name] |= labels | ({"le"} if name.endswith("_bucket") else set())
    for family in metrics.registry.collect():  # the process_* and python_* collectors
        for sample in family.samples:
            found.setdefault(sample.name, set()).update(sample.labels)
    return found


KNOWN = labels_by_metric()
# label values that must be among those the daemon writes
VALUES: dict[tuple[str, str], set[str]] = {
    ("reconciler_passes_total", "result"): set(PASS_RESULTS),
    ("reconciler_rollouts_total", "result"): {str(s) for s in RollingState if s.terminal},
    ("reconciler_migration_duration_seconds_count", "outcome"): set(MIGRATION_OUTCOMES),
    ("reconciler_health_wait_seconds_bucket", "outcome"): set(HEALTH_WAIT_OUTCOMES),
    ("reconciler_instance_info", "phase"): {str(p) for p in Phase},
    ("reconciler_instance_info", "reason"): GATE_REASONS,
}


def check_expression(expr: str) -> None:
    """Parse ``expr`` and check every selector against the daemon's registry."""
    parsed = parse(expr)
    assert parsed.selectors, f"no metric in {expr!r}"
    names = {s.metric for s in parsed.selectors}
    for selector in parsed.selectors:
        check_selector(selector, expr)
    allowed = set().union(*(KNOWN[n] for n in names)) | TARGET_LABELS
    unknown = parsed.grouping - allowed
    assert not unknown, f"{expr!r} groups by labels no metric of it has: {unknown}"


def check_selector(selector: Selector, expr: str) -> None:
    assert selector.metric in KNOWN, f"{selector.metric} is not registered by the daemon ({expr})"
    for label, op, value in selector.matchers:
        assert label in KNOWN[selector.metric] | TARGET_LABELS, (
            f"{selector.metric} has no label {label!r} ({expr})"
        )
        allowed = VALUES.get((selector.metric, label))
        if allowed is None or "$" in value:
            continue
        wanted = set(value.split("|")) if op.endswith("~") else {value}
        assert wanted <= allowed, f"{selector.metric}{{{label}}}: {wanted - allowed} never written"


# -- the parser itself ---------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "sum(rate(x[5m])",  # unbalanced
        "rate(x)",  # needs a range
        "sum(x[5m])",  # a range where an instant vector is needed
        "frobnicate(x)",  # unknown function
        "x{a=b}",  # unquoted value
        "x and 1",  # a set operator with a scalar
        "(x + y)[5m]",  # a range on an expression (a subquery needs a step colon)
        "histogram_quantile(x, 0.9)",
    ],
)
def test_the_checker_refuses_what_promtool_refuses(expr: str) -> None:
    with pytest.raises(PromQLError):
        parse(expr)


def test_the_checker_refuses_unknown_metrics_labels_and_values() -> None:
    for expr in (
        "reconciler_pass_total",  # a typo
        'reconciler_passes_total{outcome="success"}',  # no such label
        'reconciler_passes_total{result=~"success|failed"}',  # "failed" is never written
        "sum by (shard) (reconciler_passes_total)",
    ):
        with pytest.raises(AssertionError):
            check_expression(expr)
    check_expression(
        'sum by (le) (rate(reconciler_pass_duration_seconds_bucket{cluster=~"$cluster"}'
        "[$__rate_interval]))"
    )


# -- kustomization and monitors ------------------------------------------------------


def test_kustomization_lists_files_that_exist_and_parse() -> None:
    kustomization = load("kustomization.yaml")
    assert kustomization["namespace"] == "reconciler-system"
    for resource in kustomization["resources"]:
        docs = [d for d in yaml.safe_load_all((MONITORING / resource).read_text()) if d]
        assert docs and all(d["metadata"]["namespace"] == "reconciler-system" for d in docs)
    [generator] = kustomization["configMapGenerator"]
    assert generator["options"]["labels"] == {"grafana_dashboard": "1"}
    for entry in generator["files"]:
        json.loads((MONITORING / entry.split("=", 1)[-1]).read_text())


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_builds_it() -> None:
    out = subprocess.run(
        ["kubectl", "kustomize", str(MONITORING)], capture_output=True, text=True, check=True
    ).stdout
    objects = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "PodMonitor", "PrometheusRule"]
    dashboard = next(o for o in objects if o["kind"] == "ConfigMap")
    assert dashboard["metadata"]["name"] == "reconciler-grafana-dashboard"  # no hash suffix
    assert json.loads(dashboard["data"]["reconciler-dashboard.json"])["uid"]


def container_ports(path: Path) -> set[str]:
    ports: set[str] = set()
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] in ("Deployment", "StatefulSet"):
            for c in doc["spec"]["template"]["spec"]["containers"]:
                ports |= {p["name"] for p in c.get("ports") or []}
    return ports


def test_podmonitor_selects_the_daemon_pods_on_their_metrics_port() -> None:
    monitor = load("podmonitor.yaml")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True  # the catalog instance keeps its "instance" label
    for workload in ("base/deployment.yaml", "components/shards/statefulset-shards.yaml"):
        docs = [d for d in yaml.safe_load_all((DEPLOY / workload).read_text()) if d]
        pods = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
        assert pods
        for pod in pods:
            assert selector.items() <= pod["spec"]["template"]["metadata"]["labels"].items()
        assert endpoint["port"] in container_ports(DEPLOY / workload), workload


def test_servicemonitor_selects_the_service_on_its_metrics_port() -> None:
    monitor = load("servicemonitor.yaml")
    service = yaml.safe_load((DEPLOY / "base" / "service.yaml").read_text())
    [endpoint] = monitor["spec"]["endpoints"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics" and endpoint["honorLabels"] is True


# -- alert rules -----------------------------------------------------------------------

DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
RECOMMENDED = {
    "ReconcilerNoSuccessfulPass",  # README: time() - last successful pass > 900
    "ReconcilerPassesFailing",
    "ReconcilerInstanceStalled",
    "ReconcilerRolloutWaitingAtGate",
    "ReconcilerRolloutBatchStuck",
    "ReconcilerMigrationFailed",
}


def rules() -> list[dict[str, Any]]:
    spec = load("prometheusrule.yaml")
    assert spec["kind"] == "PrometheusRule"
    return [rule for group in spec["spec"]["groups"] for rule in group["rules"]]


def test_rules_are_well_formed_and_cover_the_recommended_alerts() -> None:
    spec = load("prometheusrule.yaml")
    groups = [g["name"] for g in spec["spec"]["groups"]]
    assert len(groups) == len(set(groups))
    names = [r["alert"] for r in rules()]
    assert len(names) == len(set(names))
    assert set(names) >= RECOMMENDED
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        if "for" in rule:
            assert DURATION.match(rule["for"]), rule["alert"]


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r["alert"])
def test_rule_expressions_parse_and_name_real_metrics(rule: dict[str, Any]) -> None:
    check_expression(rule["expr"])
    assert parse(rule["expr"]).type == "instant", "an alert needs a vector"


def test_the_readme_alert_is_the_rule() -> None:
    [rule] = [r for r in rules() if r["alert"] == "ReconcilerNoSuccessfulPass"]
    assert "time() - reconciler_last_successful_pass_timestamp_seconds > 900" in rule["expr"]


# -- dashboard ---------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return data


def test_dashboard_has_what_grafana_needs_to_import_it() -> None:
    board = dashboard()
    assert board["title"] and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", board["uid"])
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = board["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        grid = panel["gridPos"]
        assert set(grid) == {"h", "w", "x", "y"} and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"


def test_dashboard_panels_do_not_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells


def test_dashboard_queries_parse_and_name_real_metrics() -> None:
    board = dashboard()
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert exprs
    for expr in exprs:
        check_expression(expr)
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"])
            assert match, variable["definition"]
            assert match.group(2) in KNOWN[match.group(1)]


def test_dashboard_covers_passes_phases_versions_rollouts_and_migrations() -> None:
    used = {
        s.metric
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
        for s in parse(t["expr"]).selectors
    }
    assert {
        "reconciler_passes_total",
        "reconciler_instances",
        "reconciler_instance_info",
        "reconciler_instance_rollout_batch",
        "reconciler_rollouts_total",
        "reconciler_migration_duration_seconds_count",
    } <= used
