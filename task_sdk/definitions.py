"""Asset definitions with Apache Airflow 3's name and URI rules.

``Asset`` (name and uri), the references ``Asset.ref(name=...)`` / ``Asset.ref(uri=...)`` and
``AssetAlias``. Invalid input raises ``ValueError`` naming the broken rule.

URI rules (as in Airflow): a value without a scheme is kept as it is; otherwise the scheme is
lower-cased, the ``airflow`` scheme is reserved, user info carrying a password is dropped, the
query is sorted, the fragment is dropped and trailing slashes are stripped (an empty path
becomes ``/``). Schemes starting with ``x-`` are left untouched. A uri must be ASCII.
"""

from __future__ import annotations

import json
import urllib.parse
import warnings
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from task_sdk.jsonvalues import check_json_value, string_problem

MAX_LENGTH = 1500
#: Group of an ``Asset`` / ``AssetAlias`` when none is given (as in Airflow).
DEFAULT_GROUP = "asset"
#: Names Airflow refuses for assets because they clash with task keyword arguments.
PROHIBITED_NAMES = frozenset({"self", "context"})


def _check_identifier(owner: str, field: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{owner} {field} must be a string")
    if len(value) > MAX_LENGTH:
        raise ValueError(f"{owner} {field} cannot exceed {MAX_LENGTH} characters")
    if not value and not allow_empty:
        raise ValueError(f"{owner} {field} cannot be empty")
    if value and value.isspace():
        raise ValueError(f"{owner} {field} cannot be just whitespace")
    if (problem := string_problem(value)) is not None:
        raise ValueError(f"{owner} {field} {problem}")
    return value


def normalize_uri(uri: str) -> str:
    """Return ``uri`` normalized by Airflow's rules (see the module docstring)."""
    if not isinstance(uri, str):
        raise ValueError("Asset uri must be a string")
    if not uri.isascii():
        raise ValueError("Asset uri must only consist of ASCII characters")
    parsed = urllib.parse.urlsplit(uri)
    if not parsed.scheme and not parsed.netloc:  # does not look like a URI
        return uri
    scheme = parsed.scheme.lower()
    if not scheme or scheme.startswith("x-"):
        return uri
    if scheme == "airflow":
        raise ValueError("Asset scheme 'airflow' is reserved")
    netloc = parsed.netloc
    if parsed.password:
        warnings.warn(
            "An Asset URI should not contain a password. User info has been dropped.",
            UserWarning,
            stacklevel=3,
        )
        netloc = netloc.rpartition("@")[2]
    query = urllib.parse.urlencode(sorted(urllib.parse.parse_qsl(parsed.query)))
    return urllib.parse.urlunsplit(
        parsed._replace(
            scheme=scheme,
            netloc=netloc,
            path=parsed.path.rstrip("/") or "/",
            query=query,
            fragment="",
        )
    )


@dataclass(frozen=True)
class AssetUniqueKey:
    """What identifies an asset on the wire: its name and uri."""

    name: str
    uri: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "uri": self.uri}


@dataclass(frozen=True)
class AssetAliasUniqueKey:
    name: str


@dataclass(frozen=True)
class AssetNameRef:
    """Reference to an asset by name; resolved through the server when used."""

    name: str

    def __post_init__(self) -> None:
        _check_identifier("AssetNameRef", "name", self.name)


@dataclass(frozen=True)
class AssetUriRef:
    """Reference to an asset by uri; resolved through the server when used."""

    uri: str

    def __post_init__(self) -> None:
        _check_identifier("AssetUriRef", "uri", self.uri)


AssetRef = AssetNameRef | AssetUriRef


class Asset:
    """A data asset a task updates (outlet) or reads (inlet).

    ``Asset("name")`` / ``Asset(uri="s3://...")``: a name or uri given alone is copied to the
    other field (before the uri is normalized, as Airflow does).
    """

    __slots__ = ("extra", "group", "name", "uri")

    name: str
    uri: str
    group: str
    extra: dict[str, Any]

    def __init__(
        self,
        name: str | None = None,
        uri: str | None = None,
        *,
        group: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        if name is None and uri is None:
            raise TypeError("Asset() requires either 'name' or 'uri'")
        if name is None:
            name = str(uri)
        elif uri is None:
            uri = name
        _check_identifier("Asset", "name", name)
        if name in PROHIBITED_NAMES:
            raise ValueError(f"Asset name {name!r} is prohibited")
        uri = normalize_uri(_check_identifier("Asset", "uri", uri))
        _check_identifier("Asset", "uri", uri)
        group = DEFAULT_GROUP if group is None else group
        _check_identifier("Asset", "group", group, allow_empty=True)
        if extra is None:
            extra = {}
        if not isinstance(extra, dict):
            raise ValueError("Asset extra must be a dict")
        check_json_value(extra, where=f"Asset(name={name!r}, uri={uri!r}).extra")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "uri", uri)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "extra", extra)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Asset is immutable")

    def _identity(self) -> tuple[str, str, str, str]:
        return (self.name, self.uri, self.group, json.dumps(self.extra, sort_keys=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Asset):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return (
            f"Asset(name={self.name!r}, uri={self.uri!r}, group={self.group!r}, "
            f"extra={self.extra!r})"
        )

    @property
    def key(self) -> AssetUniqueKey:
        return AssetUniqueKey(name=self.name, uri=self.uri)

    @staticmethod
    def ref(*, name: str = "", uri: str = "") -> AssetNameRef | AssetUriRef:
        """``Asset.ref(name=...)`` or ``Asset.ref(uri=...)``: a reference resolved at run time."""
        if name and uri:
            raise TypeError("Asset reference must be made to either name or URI, not both")
        if name:
            return AssetNameRef(name)
        if uri:
            return AssetUriRef(uri)
        raise TypeError("Asset reference expects keyword argument 'name' or 'uri'")


@dataclass(frozen=True)
class AssetAlias:
    """A name through which a task emits events for assets chosen at run time."""

    name: str
    group: str = DEFAULT_GROUP

    def __post_init__(self) -> None:
        _check_identifier("AssetAlias", "name", self.name)
        _check_identifier("AssetAlias", "group", self.group, allow_empty=True)

    @property
    def key(self) -> AssetAliasUniqueKey:
        return AssetAliasUniqueKey(name=self.name)


Outlet = Asset | AssetNameRef | AssetUriRef | AssetAlias

V = TypeVar("V")


class ByNameOrUri(Generic[V]):
    """``for_asset(name=..., uri=...)`` and ``for_asset_alias(name=...)`` over ``self[key]``,
    as on Airflow's accessors: a name and a uri are that ``Asset``, one of them a reference."""

    def __getitem__(self, key: Outlet, /) -> V:
        raise NotImplementedError

    def for_asset(self, *, name: str | None = None, uri: str | None = None) -> V:
        if name and uri:
            return self[Asset(name=name, uri=uri)]
        if name:
            return self[AssetNameRef(name)]
        if uri:
            return self[AssetUriRef(uri)]
        raise ValueError("name and uri cannot both be empty")

    def for_asset_alias(self, *, name: str) -> V:
        return self[AssetAlias(name=name)]


def asset_profile(obj: Outlet) -> dict[str, str | None]:
    """The wire profile of a declared inlet/outlet: ``{"name", "uri", "type"}``."""
    if isinstance(obj, Asset):
        return {"name": obj.name, "uri": obj.uri, "type": "Asset"}
    if isinstance(obj, AssetNameRef):
        return {"name": obj.name, "uri": None, "type": "AssetNameRef"}
    if isinstance(obj, AssetUriRef):
        return {"name": None, "uri": obj.uri, "type": "AssetUriRef"}
    if isinstance(obj, AssetAlias):
        return {"name": obj.name, "uri": None, "type": "AssetAlias"}
    raise TypeError(f"not an asset, asset reference or alias: {obj!r}")
