"""Domain errors, each with a stable snake_case ``code``: the one hierarchy under ``AssetsError``.

Services raise only these (never DRF or Django HTTP exceptions), and the classes know nothing
of HTTP. The three APIs give each family one status, in one map
(``assets_app.edge.errors.DOMAIN_ERROR_STATUS``: ``NotFoundError`` → 404, ``ConflictError`` →
409, ``InvalidInputError`` → 400, ``RetryableError`` → 503 …); management commands turn any
``AssetsError`` into a ``CommandError`` carrying its message.
"""

from __future__ import annotations

from typing import Any


class AssetsError(Exception):
    """Base of every domain error. ``context`` holds extra fields for the error body."""

    code = "error"
    default_message = "The request could not be processed"

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message
        self.context = context
        super().__init__(self.message)


# --- bad input: what a client or an operator sent cannot be used ------------------------------


class InvalidInputError(AssetsError):
    code = "invalid_input"
    default_message = "Invalid input"


class ManifestError(InvalidInputError):
    """The manifest cannot be read or is invalid; the message names the offending place."""

    code = "invalid_manifest"


class AssetConflictError(ManifestError):
    """Two active assets would share a name or a uri; the message names both."""

    code = "active_asset_conflict"


class DagParserError(InvalidInputError):
    """The DAG parser cannot run at all (no such interpreter, no Airflow in it, no such
    folder): a setup problem, not a broken DAG file."""

    code = "dag_parser_unavailable"


class InvalidAssetExpression(InvalidInputError):  # noqa: N818 - named after what it is
    """An asset condition (a stored ``Dag.asset_expression``, or a manifest's schedule before
    the manifest names it a ``ManifestError``) is not in the grammar of
    ``assets_app.conditions``; the message starts with the place."""

    code = "invalid_asset_expression"


class MapLengthExceededError(InvalidInputError):
    """A task pushed more values for a mapped downstream than ``MAX_MAP_LENGTH`` (Airflow's
    ``[core] max_map_length``): Airflow's 400, which fails the pushing task."""

    code = "unmappable_return_value_length"
    default_message = "pushed value is too large to map as a downstream's dependency"


class TaskInstanceInputError(InvalidInputError):
    """The requested task instance (or its token) cannot be created; the message says why."""

    code = "invalid_task_instance"


class DagRunConfError(InvalidInputError):
    """A run's ``conf`` does not satisfy its DAG's params (their JSON schemas, or a required
    param it does not give); ``param`` names the first that fails (``assets_app.params``)."""

    code = "invalid_params"


class AssetAmbiguousError(InvalidInputError):
    """A name or a uri alone matches several inactive assets and no active one."""

    code = "ambiguous_asset"


# --- not found ----------------------------------------------------------------------------------


class NotFoundError(AssetsError):
    code = "not_found"
    default_message = "Not found"


class TaskInstanceNotFoundError(NotFoundError):
    default_message = "Task instance not found"


class DagRunNotFoundError(NotFoundError):
    default_message = "DAG run not found"


class DagNotFoundError(NotFoundError):
    default_message = "DAG not found"


class AssetNotFoundError(NotFoundError):
    default_message = "Asset not found"


class XComNotFoundError(NotFoundError):
    default_message = "XCom not found"


# --- conflicts with the stored state ------------------------------------------------------------


class ConflictError(AssetsError):
    code = "conflict"


class DagRunExistsError(ConflictError):
    """A run with this run id exists already for the DAG."""

    code = "dag_run_exists"


class DagStaleError(ConflictError):
    """The DAG is stale (gone from its file): no new run of it can be made."""

    code = "dag_stale"


class TaskInstanceInvalidStateError(ConflictError):
    """The task instance is not in a state that allows the requested transition.

    ``previous_state`` (the stored state) goes into the error body.
    """

    code = "invalid_state"
    default_message = "TI was not in the running state so it cannot be updated"


class TaskInstanceRunningElsewhereError(ConflictError):
    """A heartbeat came from another host or process than the one running the task."""

    code = "running_elsewhere"
    default_message = "TI is already running elsewhere"


class TaskInstanceNotRunningError(ConflictError):
    """A heartbeat for a task instance that is not running."""

    code = "not_running"
    default_message = "TI is no longer in the running state and task should terminate"


class TaskInstanceClearRefusedError(ConflictError):
    """A clear would touch a task instance that is running; nothing was cleared."""

    code = "clear_refused"


class TaskLogOffsetError(ConflictError):
    """A log chunk starts after the end of what was received for the try: a chunk before it
    is missing. ``expected_offset`` (where the next chunk must start) goes into the body."""

    code = "log_offset_gap"


# --- authentication -------------------------------------------------------------------------------


class TokenError(AssetsError):
    """A task token is malformed, badly signed, expired, not yet valid or for another audience."""

    code = "invalid_token"
    default_message = "Invalid auth token"


# --- transient: worth retrying ----------------------------------------------------------------


class RetryableError(AssetsError):
    """The database answered in a way that a retry of the same request can fix."""

    code = "retry"
    default_message = "Temporary conflict; retry the request"


class AssetRegistrationError(RetryableError):
    """Rows that must exist after an idempotent insert could not be read back.

    Cannot happen under READ COMMITTED (Django's default); raised rather than silently
    dropping events if the database runs at a stricter isolation level.
    """

    code = "asset_registration_conflict"


# --- variables, connections and their encryption ----------------------------------------------


class VariableNotFoundError(NotFoundError):
    default_message = "Variable not found"


class ConnectionNotFoundError(NotFoundError):
    default_message = "Connection not found"


class VariableExistsError(ConflictError):
    """A variable with this key is already stored (a create, not a set)."""

    code = "variable_exists"


class ConnectionExistsError(ConflictError):
    """A connection with this ``conn_id`` is already stored."""

    code = "connection_exists"


class SecretsError(AssetsError):
    """A secret cannot be encrypted or decrypted with the configured ``FERNET_KEY``.

    The message names the row and what to do; it never holds the secret itself.
    """

    code = "secrets_error"


class FernetKeyMissingError(SecretsError):
    """A secret was to be stored while no ``FERNET_KEY`` is configured (production)."""

    code = "fernet_key_missing"
    default_message = (
        "No FERNET_KEY is configured, so secrets cannot be stored encrypted; set FERNET_KEY "
        "(see docs/secrets.md)"
    )


class SecretDecryptError(SecretsError):
    """A stored secret was encrypted with a key that is no longer in ``FERNET_KEY``."""

    code = "secret_undecryptable"


# --- task and asset state stores ----------------------------------------------------------------


class StateStoreKeyNotFoundError(NotFoundError):
    """No value is stored under the key (``context["task_state_store"].get`` → its default)."""

    default_message = "State store key not found"


# --- pools -----------------------------------------------------------------------------------


class PoolNotFoundError(NotFoundError):
    default_message = "Pool not found"


class PoolExistsError(ConflictError):
    """A pool with this name is already stored (a create, not a set)."""

    code = "pool_exists"


class PoolInputError(InvalidInputError):
    """A pool's name, slots, description or include_deferred cannot be used, or the change
    would delete ``default_pool`` or rename a pool."""

    code = "invalid_pool"
