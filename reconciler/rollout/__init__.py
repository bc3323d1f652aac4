"""Batch rollouts (SPEC section 4): batch targets, effective settings, the state machine.

Pure: records and observations in, a new record and actions for the kube driver
out. See docs/ROLLOUTS.md for how the actions move replicas per workload kind.
"""

from reconciler.model.rollout import (
    BatchState,
    Replicas,
    RollingState,
    RolloutFormatError,
    RolloutRecord,
    describe,
    noteworthy,
)
from reconciler.rollout.analysis import (
    ANALYSIS_LABEL,
    BATCH_LABEL,
    OWNER_LABEL,
    AnalysisRun,
    analysis_job_name,
    render_analysis_job,
    rollout_key,
)
from reconciler.rollout.driver import RolloutDriver, drive_once
from reconciler.rollout.machine import (
    INCONCLUSIVE_REASON,
    POLL_SECONDS,
    Action,
    Consolidate,
    Finalize,
    Observation,
    Prepare,
    RetireOld,
    Rollback,
    RunAnalysis,
    ScaleBatch,
    Step,
    Workload,
    begin,
    measurement_due,
    retry_allowed,
    step,
)
from reconciler.rollout.plan import PlanError, RolloutSettings, merge_plans, plan_batches

__all__ = [
    "ANALYSIS_LABEL",
    "BATCH_LABEL",
    "INCONCLUSIVE_REASON",
    "OWNER_LABEL",
    "POLL_SECONDS",
    "Action",
    "AnalysisRun",
    "BatchState",
    "Consolidate",
    "Finalize",
    "Observation",
    "PlanError",
    "Prepare",
    "Replicas",
    "RetireOld",
    "Rollback",
    "RollingState",
    "RolloutDriver",
    "RolloutFormatError",
    "RolloutRecord",
    "RolloutSettings",
    "RunAnalysis",
    "ScaleBatch",
    "Step",
    "Workload",
    "analysis_job_name",
    "begin",
    "describe",
    "drive_once",
    "measurement_due",
    "merge_plans",
    "noteworthy",
    "plan_batches",
    "render_analysis_job",
    "retry_allowed",
    "rollout_key",
    "step",
]
