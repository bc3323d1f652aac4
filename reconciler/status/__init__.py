"""Status records and commit messages, rendered from results (SPEC section 3).

Pure functions over ``reconciler.model.status.InstanceStatus``: the YAML file of
a record, whether a new record differs from the recorded one, the commit message
that says what happened, and the tables ``status``/``history`` print. The status
ledger in ``reconciler.source`` stores what these functions produce.
"""

from reconciler.status.messages import (
    ROLLOUT_TRAILER_KEYS,
    TRAILER_BATCH,
    TRAILER_CLUSTER,
    TRAILER_INSTANCE,
    TRAILER_MIGRATION,
    TRAILER_PASS,
    TRAILER_PHASE,
    TRAILER_REPLICAS,
    TRAILER_ROLLOUT,
    TRAILER_ROLLOUT_STATE,
    TRAILER_SOURCE_COMMIT,
    TRAILER_VERSION,
    commit_message,
    describe_change,
    describe_migration,
    dropped_message,
    new_migration,
    parse_trailers,
    rollout_trailers,
    summary_of,
)
from reconciler.status.records import (
    INSTANCES_DIR,
    PreparedRecord,
    StatusFileError,
    dump_status,
    parse_status,
    prepare_record,
    status_path,
)
from reconciler.status.views import HistoryEntry, UnreadableStatus, history_table, status_table

__all__ = [
    "INSTANCES_DIR",
    "ROLLOUT_TRAILER_KEYS",
    "TRAILER_BATCH",
    "TRAILER_CLUSTER",
    "TRAILER_INSTANCE",
    "TRAILER_MIGRATION",
    "TRAILER_PASS",
    "TRAILER_PHASE",
    "TRAILER_REPLICAS",
    "TRAILER_ROLLOUT",
    "TRAILER_ROLLOUT_STATE",
    "TRAILER_SOURCE_COMMIT",
    "TRAILER_VERSION",
    "HistoryEntry",
    "PreparedRecord",
    "StatusFileError",
    "UnreadableStatus",
    "commit_message",
    "describe_change",
    "describe_migration",
    "dropped_message",
    "dump_status",
    "history_table",
    "new_migration",
    "parse_status",
    "parse_trailers",
    "prepare_record",
    "rollout_trailers",
    "status_path",
    "status_table",
    "summary_of",
]
