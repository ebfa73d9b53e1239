"""Bearer-JWT authentication of task runners (docs/api-execution.md, "Auth")."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from assets_app.exceptions import TokenError
from assets_app.tokens import TokenClaims, token_decode
from executionapi.exceptions import InvalidToken

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskRunner:
    """``request.user`` of an authenticated request: the runner of one task instance."""

    claims: TokenClaims
    is_authenticated: bool = True
    is_anonymous: bool = False

    @property
    def task_instance_id(self) -> str:
        return self.claims.subject


class TaskRunnerTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <JWT>``.

    No bearer token → not authenticated (the permission check answers 401); a token that is
    malformed, badly signed, expired or for another audience → 403.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[TaskRunner, TokenClaims] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise InvalidToken({"reason": "invalid_token", "message": "Malformed bearer token"})
        try:
            claims = token_decode(parts[1].decode("ascii"))
        except (TokenError, UnicodeDecodeError) as exc:
            logger.info("rejected execution API token: %s", exc)
            raise InvalidToken({"reason": "invalid_token", "message": str(exc)}) from exc
        return TaskRunner(claims=claims), claims

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class TaskRunnerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]  # drf-spectacular's registry hook
    """Describes the bearer JWT in the OpenAPI schema."""

    target_class = "executionapi.authentication.TaskRunnerTokenAuthentication"
    name = "TaskRunnerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
