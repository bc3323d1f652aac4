"""How fast the sandbox's simulated cluster moves: one settings object for every controller.

A real cluster takes time between a write and its effect: the controller manager
reacts, the scheduler binds, the kubelet pulls images and starts containers, a
readiness probe passes, a Job's container runs to its end. Rollouts and migration
hooks are about exactly those gaps, so the sandbox simulates them with these
delays (seconds). Tests shrink them to keep the suite fast; ``reconciler sandbox``
and the demo use slower values so a person can watch pods roll.

A deleted pod's grace period is the real one by default (``terminationGracePeriodSeconds``,
30 s unless the pod or the DELETE says otherwise): ``pod_grace_scale`` multiplies it,
so a test bed can let a terminating pod linger for a fraction of it while the API
still reports the real ``deletionGracePeriodSeconds``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from ipaddress import ip_network

DEFAULT_DELAY = 0.2
DEFAULT_NODES = 3
DEFAULT_JOB_BACKOFF = 10.0  # the Job controller's first retry delay on a real cluster
TEST_GRACE_SCALE = 0.005  # test harnesses: a 30 s grace period lasts 0.15 s


@dataclass(frozen=True)
class Timing:
    """Delays of the simulated control plane and kubelet, and the size of the node pool.

    ``pod_start`` (scheduling to containers running) and ``job_duration`` (how long a
    run-to-completion container runs) default to ``controller_delay``. A container
    whose image matches a glob of ``ready_delays`` becomes Ready that long after it
    started (the first matching glob wins; others are Ready at once, as a container
    without a readiness probe is).
    """

    controller_delay: float = DEFAULT_DELAY
    pod_start: float | None = None
    job_duration: float | None = None
    ready_delays: tuple[tuple[str, float], ...] = ()
    nodes: int = DEFAULT_NODES
    job_backoff: float = DEFAULT_JOB_BACKOFF
    cron_minute: float = 60.0  # seconds per minute of CronJob schedules
    pod_grace_scale: float = 1.0  # wall-clock seconds per second of a pod's grace period
    # the addresses a simulated cloud gives LoadBalancer Services (None: no cloud)
    load_balancer_ips: str | None = None

    def __post_init__(self) -> None:
        values = [
            self.controller_delay,
            self.pod_start or 0.0,
            self.job_duration or 0.0,
            self.job_backoff,
        ]
        if self.pod_grace_scale < 0:
            raise ValueError("the pod grace scale must not be negative")
        if self.cron_minute <= 0:
            raise ValueError("a CronJob schedule minute must last more than 0 seconds")
        if any(v < 0 for v in values) or any(d < 0 for _, d in self.ready_delays):
            raise ValueError("sandbox delays must not be negative")
        if self.nodes < 1:
            raise ValueError("the sandbox needs at least one node")
        if self.load_balancer_ips is not None:
            try:
                ip_network(self.load_balancer_ips, strict=False)
            except ValueError:
                raise ValueError(
                    f"load balancer addresses {self.load_balancer_ips!r}: expected a CIDR "
                    "range such as 172.18.255.200/29"
                ) from None

    @property
    def start(self) -> float:
        return self.controller_delay if self.pod_start is None else self.pod_start

    @property
    def run(self) -> float:
        return self.controller_delay if self.job_duration is None else self.job_duration

    def grace(self, seconds: float) -> float:
        """How long (wall clock) a terminating pod with ``seconds`` of grace lingers."""
        return max(0.0, seconds) * self.pod_grace_scale

    def retry_delay(self, failures: int) -> float:
        """How long a Job waits before its next pod after ``failures`` failed ones:
        ``job_backoff``·2ⁿ⁻¹, at most 36 times ``job_backoff`` (10 s and 6 min on a
        cluster: https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy)."""
        if failures < 1:
            return 0.0
        return self.job_backoff * min(2.0 ** (failures - 1), 36.0)

    def ready_delay(self, images: Iterable[str]) -> float:
        """The longest readiness delay among a pod's container images."""
        delays = [
            next((d for glob, d in self.ready_delays if fnmatchcase(image, glob)), 0.0)
            for image in images
        ]
        return max(delays, default=0.0)


def parse_ready_delay(text: str) -> tuple[str, float]:
    """``GLOB=SECONDS`` (the ``--ready-delay`` option) as a pair; ValueError names the fault."""
    glob, sep, seconds = text.rpartition("=")
    if not sep or not glob:
        raise ValueError(f"--ready-delay {text!r}: expected GLOB=SECONDS, e.g. 'app:2.*=5'")
    try:
        value = float(seconds)
    except ValueError:
        raise ValueError(f"--ready-delay {text!r}: {seconds!r} is not a number") from None
    if value < 0:
        raise ValueError(f"--ready-delay {text!r}: seconds must not be negative")
    return glob, value
