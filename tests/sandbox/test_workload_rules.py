"""What a real API server refuses in workloads, ConfigMaps and Secrets: one 422 listing
every cause with the server's field paths and wording, and 400 for a wrong JSON type.

Pages imitated:
https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation (causes),
https://kubernetes.io/docs/concepts/workloads/pods/#pod-templates (containers),
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#pod-template
(``restartPolicy: Always`` only), https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#strategy,
https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#schedule-syntax,
https://kubernetes.io/docs/concepts/configuration/configmap/#configmap-object,
https://kubernetes.io/docs/concepts/configuration/secret/#tls-secrets,
https://kubernetes.io/docs/tasks/inject-data-application/define-environment-variable-container/,
https://kubernetes.io/docs/concepts/storage/volumes/,
https://kubernetes.io/docs/concepts/workloads/controllers/job/#specifying-your-own-pod-selector.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from reconciler.sandbox.cron import CronError, parse
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import deployment, http, job

NS = "/api/v1/namespaces/default"
APPS = "/apis/apps/v1/namespaces/default"
BATCH = "/apis/batch/v1/namespaces/default"
POD = "spec.template.spec"


def causes(error: Any) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in error["details"]["causes"]]


def refused(sandbox: SandboxHandle, path: str, body: Any) -> list[tuple[str, str, str]]:
    status, error = http(sandbox, "POST", path, body)
    assert status == 422, error
    assert error["reason"] == "Invalid" and error["code"] == 422
    return causes(error)


def test_a_deployment_without_containers_is_refused(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"] = []
    assert refused(sandbox, f"{APPS}/deployments", body) == [
        (f"{POD}.containers", "FieldValueRequired", "Required value")
    ]


def test_every_cause_is_in_one_answer(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    pod = body["spec"]["template"]["spec"]
    pod["restartPolicy"] = "Never"
    pod["containers"].append({"name": "app", "image": "nginx", "env": [{"name": "MY VAR"}]})
    status, error = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 422
    env_message = (
        'Invalid value: "MY VAR": a valid environment variable name must consist of '
        "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit "
        "(e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for "
        "validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
    )
    restart = 'Unsupported value: "Never": supported values: "Always"'
    assert causes(error) == [
        (f"{POD}.containers[1].env[0].name", "FieldValueInvalid", env_message),
        (f"{POD}.containers[1].name", "FieldValueDuplicate", 'Duplicate value: "app"'),
        (f"{POD}.restartPolicy", "FieldValueNotSupported", restart),
    ]
    assert error["message"] == (
        f'Deployment.apps "web" is invalid: [{POD}.containers[1].env[0].name: {env_message}, '
        f'{POD}.containers[1].name: Duplicate value: "app", {POD}.restartPolicy: {restart}]'
    )
    status, _ = http(sandbox, "GET", f"{APPS}/deployments/web")
    assert status == 404  # nothing was stored


def test_a_mount_of_an_undefined_volume_is_refused(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    assert refused(sandbox, f"{APPS}/deployments", body) == [
        (f"{POD}.containers[0].volumeMounts[0].name", "FieldValueNotFound", 'Not found: "data"')
    ]
    body["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    status, _ = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 201


def test_init_container_names_collide_with_containers(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["initContainers"] = [{"name": "app", "image": "busybox"}]
    assert refused(sandbox, f"{APPS}/deployments", body) == [
        (f"{POD}.initContainers[0].name", "FieldValueDuplicate", 'Duplicate value: "app"')
    ]


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (
            {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}},
            [
                (
                    "spec.strategy.rollingUpdate",
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                )
            ],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
            [
                (
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    "FieldValueInvalid",
                    "Invalid value: 0: may not be 0 when `maxSurge` is 0",
                )
            ],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}},
            [
                (
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    "FieldValueInvalid",
                    "Invalid value: 0: may not be 0 when `maxSurge` is 0",
                )
            ],
        ),
        (
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "110%"}},
            [
                (
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    "FieldValueInvalid",
                    'Invalid value: "110%": must not be greater than 100%',
                )
            ],
        ),
        (
            {"type": "Rolling"},
            [
                (
                    "spec.strategy.type",
                    "FieldValueNotSupported",
                    'Unsupported value: "Rolling": supported values: "Recreate", "RollingUpdate"',
                )
            ],
        ),
    ],
)
def test_deployment_strategies(
    sandbox: SandboxHandle, strategy: dict[str, Any], expected: list[Any]
) -> None:
    body = deployment("web")
    body["spec"]["strategy"] = strategy
    assert refused(sandbox, f"{APPS}/deployments", body) == expected


def test_the_surge_alone_may_be_zero(sandbox: SandboxHandle) -> None:
    """maxUnavailable is defaulted to 25% first, so maxSurge: 0 alone is valid."""
    body = deployment("web")
    body["spec"]["strategy"] = {"rollingUpdate": {"maxSurge": 0}}
    status, created = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 201
    assert created["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": "25%"}


def test_recreate_is_valid_without_a_rolling_update(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["strategy"] = {"type": "Recreate"}
    status, created = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 201 and created["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("off", "expected exactly 5 fields, found 1: [off]"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-2 * * * *", "beginning of range (5) beyond end of range (2): 5-2"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("@sometimes", "unrecognized descriptor: @sometimes"),
    ],
)
def test_a_schedule_that_is_not_cron_is_refused(
    sandbox: SandboxHandle, schedule: str, message: str
) -> None:
    got = refused(sandbox, f"{BATCH}/cronjobs", job("nightly", schedule))
    quoted = schedule.replace('"', '\\"')
    assert got == [("spec.schedule", "FieldValueInvalid", f'Invalid value: "{quoted}": {message}')]


@pytest.mark.parametrize(
    "schedule", ["*/5 * * * *", "0 3 * JAN-MAR sun", "@daily", "@every 1h30m", "0 0 1,15 * ?"]
)
def test_cron_schedules_the_parser_accepts(sandbox: SandboxHandle, schedule: str) -> None:
    status, _ = http(sandbox, "POST", f"{BATCH}/cronjobs", job("nightly", schedule))
    assert status == 201


def test_the_parsed_schedule() -> None:
    schedule = parse("*/20 9-17 * JAN,dec 1-5")
    assert schedule.minutes == {0, 20, 40}
    assert schedule.hours == set(range(9, 18))
    assert schedule.months == {1, 12} and schedule.weekdays == {1, 2, 3, 4, 5}
    assert parse("@every 1m30s").every == 90
    with pytest.raises(CronError, match="too many hyphens: 1-2-3"):
        parse("1-2-3 * * * *")
    with pytest.raises(CronError, match="empty spec string"):
        parse("")


def test_a_time_zone_belongs_in_its_own_field(sandbox: SandboxHandle) -> None:
    got = refused(sandbox, f"{BATCH}/cronjobs", job("nightly", "TZ=UTC 0 * * * *"))
    why = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    assert got == [
        ("spec.schedule", "FieldValueInvalid", f'Invalid value: "TZ=UTC 0 * * * *": {why}')
    ]


def test_a_cronjob_name_leaves_room_for_its_jobs(sandbox: SandboxHandle) -> None:
    name = "n" * 53
    assert [c[0] for c in refused(sandbox, f"{BATCH}/cronjobs", job(name, "@hourly"))] == [
        "metadata.name"
    ]


def test_an_invalid_configmap_key_is_refused(sandbox: SandboxHandle) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg"},
        "data": {"bad key": "x", "..": "y", "good.key-1_A": "z"},
        "binaryData": {"good.key-1_A": "eg=="},
    }
    key_error = (
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
        "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
        "'[-._a-zA-Z0-9]+')"
    )
    assert refused(sandbox, f"{NS}/configmaps", body) == [
        ("data[bad key]", "FieldValueInvalid", f'Invalid value: "bad key": {key_error}'),
        ("data[..]", "FieldValueInvalid", "Invalid value: \"..\": must not be '..'"),
        (
            "data[good.key-1_A]",
            "FieldValueInvalid",
            'Invalid value: "good.key-1_A": duplicate of key present in binaryData',
        ),
    ]


def secret(kind: str, data: dict[str, str]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "type": kind,
        "data": encoded,
    }


def test_a_tls_secret_needs_its_certificate_and_key(sandbox: SandboxHandle) -> None:
    assert refused(sandbox, f"{NS}/secrets", secret("kubernetes.io/tls", {})) == [
        ("data[tls.crt]", "FieldValueRequired", "Required value"),
        ("data[tls.key]", "FieldValueRequired", "Required value"),
    ]
    body = secret("kubernetes.io/tls", {"tls.crt": "cert"})
    assert [c[0] for c in refused(sandbox, f"{NS}/secrets", body)] == ["data[tls.key]"]
    body = secret("kubernetes.io/tls", {"tls.crt": "cert", "tls.key": "key"})
    assert http(sandbox, "POST", f"{NS}/secrets", body)[0] == 201
    # its type cannot change afterwards
    body["type"] = "Opaque"
    status, error = http(sandbox, "PUT", f"{NS}/secrets/s", body)
    assert status == 422 and [c[0] for c in causes(error)] == ["type"]


def test_typed_secrets_from_string_data(sandbox: SandboxHandle) -> None:
    body = secret("kubernetes.io/basic-auth", {})
    assert [c[0] for c in refused(sandbox, f"{NS}/secrets", body)] == [
        "data[username]",
        "data[password]",
    ]
    body["stringData"] = {"username": "admin"}  # merged into data before validation
    assert http(sandbox, "POST", f"{NS}/secrets", body)[0] == 201
    body = secret("kubernetes.io/ssh-auth", {})
    body["metadata"]["name"] = "ssh"
    assert [c[0] for c in refused(sandbox, f"{NS}/secrets", body)] == ["data[ssh-privatekey]"]


def test_a_jobs_selector_is_immutable(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "POST", f"{BATCH}/jobs", job())[0] == 201
    # the Job controller writes the Job's status meanwhile, and a PUT from an older read
    # is then 409 Conflict: read again and retry, as kubectl edit's clients do
    # (https://kubernetes.io/docs/reference/using-api/api-concepts/#conflicts)
    for _ in range(50):
        live = http(sandbox, "GET", f"{BATCH}/jobs/once")[1]
        live["spec"]["selector"]["matchLabels"]["extra"] = "x"
        status, error = http(sandbox, "PUT", f"{BATCH}/jobs/once", live)
        if status != 409:
            break
    assert status == 422, error
    assert [c[0] for c in causes(error)] == ["spec.selector"]
    assert causes(error)[0][2].endswith(": field is immutable")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["spec"].update(replicas="three"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
            "of type int32",
        ),
        (
            lambda d: d["metadata"].update(labels={"tier": 1}),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
            "of type string",
        ),
        (
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(ports={"a": 1}),
            "json: cannot unmarshal object into Go struct field "
            "Container.spec.template.spec.containers.ports of type []v1.ContainerPort",
        ),
        (
            lambda d: d["spec"].update(paused="yes"),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.paused "
            "of type bool",
        ),
        (
            lambda d: d["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=1.5),
            "json: cannot unmarshal number 1.5 into Go struct field "
            "PodSpec.spec.template.spec.terminationGracePeriodSeconds of type int64",
        ),
    ],
)
def test_a_wrong_type_is_a_bad_request(sandbox: SandboxHandle, change: Any, message: str) -> None:
    body = deployment("web")
    change(body)
    status, error = http(sandbox, "POST", f"{APPS}/deployments", body)
    assert status == 400 and error["reason"] == "BadRequest"
    assert error["message"] == (
        f'Deployment in version "v1" cannot be handled as a Deployment: {message}'
    )


def test_a_wrong_type_in_a_patch_is_a_bad_request(sandbox: SandboxHandle) -> None:
    assert http(sandbox, "POST", f"{APPS}/deployments", deployment("web"))[0] == 201
    status, error = http(
        sandbox,
        "PATCH",
        f"{APPS}/deployments/web",
        {"spec": {"replicas": "2"}},
        content_type="application/merge-patch+json",
    )
    assert status == 400 and "DeploymentSpec.spec.replicas of type int32" in error["message"]


def test_quantities_decode_from_numbers(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 1}}
    assert http(sandbox, "POST", f"{APPS}/deployments", body)[0] == 201


def apply(sandbox: SandboxHandle, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return http(sandbox, "PATCH", f"{path}?fieldManager=m", body, "application/apply-patch+yaml")


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        (
            f"{NS}/configmaps/probe-config",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "probe-config", "namespace": "default"},
                "data": {"VERSION": 1},
            },
            "(default/probe-config; /v1, Kind=ConfigMap): "
            ".data.VERSION: expected string, got &value.valueUnstructured{Value:1}",
        ),
        (
            f"{APPS}/deployments/web",
            {
                **deployment("web"),
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    **deployment("web")["spec"],
                    "replicas": "3",
                },
            },
            "(default/web; apps/v1, Kind=Deployment): "
            ".spec.replicas: expected numeric (int or float), got string",
        ),
    ],
)
def test_server_side_apply_of_a_wrong_type(
    sandbox: SandboxHandle, path: str, body: dict[str, Any], error: str
) -> None:
    """Server-side apply's typed conversion refuses it: 500 without a reason, its message
    naming the field (https://kubernetes.io/docs/reference/using-api/server-side-apply/)."""
    status, answer = apply(sandbox, path, body)
    assert status == 500 and "reason" not in answer
    assert answer["message"] == f"failed to create typed patch object {error}"


def test_server_side_apply_names_list_items_by_key(sandbox: SandboxHandle) -> None:
    body = deployment("web")
    body["metadata"]["namespace"] = "default"
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "PORT", "value": 587}]
    status, answer = apply(sandbox, f"{APPS}/deployments/web", body)
    assert status == 500
    assert answer["message"].endswith(
        '.spec.template.spec.containers[name="app"].env[name="PORT"].value: '
        "expected string, got &value.valueUnstructured{Value:587}"
    )
