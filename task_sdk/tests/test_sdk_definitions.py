"""Asset / AssetAlias / Asset.ref: Airflow's name and URI rules, one test per rule."""

import os
import subprocess
import sys

import pytest

from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetNameRef,
    AssetUriRef,
    asset_profile,
    normalize_uri,
)


def test_name_alone_is_copied_to_uri():
    asset = Asset("orders")
    assert (asset.name, asset.uri) == ("orders", "orders")


def test_uri_alone_is_copied_to_name_before_normalization():
    asset = Asset(uri="S3://bucket/orders/")
    assert asset.uri == "s3://bucket/orders"
    assert asset.name == "S3://bucket/orders/"


def test_name_and_uri_positional_and_keyword():
    assert Asset("a", "s3://b/a") == Asset(name="a", uri="s3://b/a")


def test_neither_name_nor_uri_is_a_type_error():
    with pytest.raises(TypeError, match="either 'name' or 'uri'"):
        Asset()


def test_defaults_group_asset_and_empty_extra():
    asset = Asset("a")
    assert asset.group == "asset"
    assert asset.extra == {}


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        pytest.param("S3://bucket/key", "s3://bucket/key", id="scheme-lowercased"),
        pytest.param("s3://Bucket/Key", "s3://Bucket/Key", id="host-and-path-case-kept"),
        pytest.param(
            "s3://user:secret@bucket/key", "s3://bucket/key", id="password-userinfo-dropped"
        ),
        pytest.param(
            "s3://user@bucket/key", "s3://user@bucket/key", id="user-without-password-kept"
        ),
        pytest.param(
            "s3://bucket/key?b=2&a=1&c=0", "s3://bucket/key?a=1&b=2&c=0", id="query-sorted"
        ),
        pytest.param("s3://bucket/key#part", "s3://bucket/key", id="fragment-dropped"),
        pytest.param("s3://bucket/key///", "s3://bucket/key", id="trailing-slashes-stripped"),
        pytest.param("s3://bucket", "s3://bucket/", id="empty-path-becomes-slash"),
        pytest.param("s3://bucket/", "s3://bucket/", id="root-path-kept"),
        pytest.param("file:///tmp/data/", "file:///tmp/data", id="file-scheme"),
        pytest.param("no_scheme/path/", "no_scheme/path/", id="not-a-uri-kept-verbatim"),
        pytest.param("x-custom://Thing/?b=1#f", "x-custom://Thing/?b=1#f", id="x-scheme-untouched"),
    ],
)
def test_uri_normalization(uri, expected):
    if "secret" in uri:
        with pytest.warns(UserWarning, match="password"):
            assert Asset(name="a", uri=uri).uri == expected
    else:
        assert Asset(name="a", uri=uri).uri == expected
        assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"uri": "airflow://dag/x"}, "scheme 'airflow' is reserved", id="airflow-scheme"
        ),
        pytest.param(
            {"uri": "AIRFLOW://dag/x"}, "scheme 'airflow' is reserved", id="airflow-any-case"
        ),
        pytest.param({"name": "a", "uri": "s3://bücket/x"}, "ASCII", id="non-ascii-uri"),
        pytest.param({"name": ""}, "name cannot be empty", id="empty-name"),
        pytest.param({"name": "a", "uri": ""}, "uri cannot be empty", id="empty-uri"),
        pytest.param({"name": "   "}, "name cannot be just whitespace", id="whitespace-name"),
        pytest.param(
            {"name": "a", "uri": " \t"}, "uri cannot be just whitespace", id="whitespace-uri"
        ),
        pytest.param({"name": "n" * 1501}, "name cannot exceed 1500", id="long-name"),
        pytest.param(
            {"name": "a", "uri": "s3://b/" + "k" * 1500}, "uri cannot exceed 1500", id="long-uri"
        ),
        pytest.param({"name": 42}, "name must be a string", id="name-not-str"),
        pytest.param({"name": "a", "uri": 42}, "uri must be a string", id="uri-not-str"),
        pytest.param(
            {"name": "a", "group": " "}, "group cannot be just whitespace", id="blank-group"
        ),
        pytest.param(
            {"name": "a", "group": "g" * 1501}, "group cannot exceed 1500", id="long-group"
        ),
        pytest.param({"name": "a", "extra": ["x"]}, "extra must be a dict", id="extra-not-dict"),
        pytest.param({"name": "self"}, "prohibited", id="name-self"),
        pytest.param({"name": "context"}, "prohibited", id="name-context"),
    ],
)
def test_invalid_input_raises_value_error_naming_the_rule(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Asset(**kwargs)


def test_maximum_lengths_are_accepted():
    asset = Asset(name="n" * 1500, uri="s3://b/" + "k" * 1493)
    assert len(asset.name) == 1500
    assert len(asset.uri) == 1500


def test_non_ascii_name_is_allowed():
    assert Asset(name="données", uri="s3://b/d").name == "données"


def test_assets_are_hashable_and_compare_by_value():
    a = Asset("a", "s3://b/a", extra={"x": 1})
    same = Asset("a", "S3://b/a/", extra={"x": 1})
    assert a == same
    assert {a: 1}[same] == 1
    assert a != Asset("a", "s3://b/a", extra={"x": 2})
    assert a.key == Asset("a", "s3://b/a").key


def test_assets_are_immutable():
    with pytest.raises(AttributeError):
        Asset("a").name = "b"


def test_refs():
    assert Asset.ref(name="n") == AssetNameRef("n")
    assert Asset.ref(uri="s3://b/u") == AssetUriRef("s3://b/u")
    assert {Asset.ref(name="n"): 1}[AssetNameRef("n")] == 1
    with pytest.raises(TypeError, match="either name or URI"):
        Asset.ref(name="n", uri="u")
    with pytest.raises(TypeError, match="'name' or 'uri'"):
        Asset.ref()
    with pytest.raises(ValueError, match="cannot be just whitespace"):
        AssetNameRef("  ")


def test_alias():
    alias = AssetAlias("my_alias")
    assert alias.group == "asset"
    assert {alias: 1}[AssetAlias(name="my_alias")] == 1
    with pytest.raises(ValueError, match="AssetAlias name cannot be empty"):
        AssetAlias("")
    with pytest.raises(ValueError, match="AssetAlias name cannot exceed 1500"):
        AssetAlias("a" * 1501)


def test_profiles():
    assert asset_profile(Asset("a", "s3://b/a")) == {
        "name": "a",
        "uri": "s3://b/a",
        "type": "Asset",
    }
    assert asset_profile(Asset.ref(name="n")) == {"name": "n", "uri": None, "type": "AssetNameRef"}
    assert asset_profile(Asset.ref(uri="u")) == {"name": None, "uri": "u", "type": "AssetUriRef"}
    assert asset_profile(AssetAlias("al")) == {"name": "al", "uri": None, "type": "AssetAlias"}
    with pytest.raises(TypeError):
        asset_profile("not an asset")


def test_the_package_never_imports_django():
    code = (
        "import sys, task_sdk, task_sdk.cli, task_sdk.supervisor, task_sdk.runner, task_sdk.client,"
        " task_sdk.forking, task_sdk.timestamps;"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'django'], 'django imported'"
    )
    import task_sdk

    package_root = os.path.dirname(os.path.dirname(task_sdk.__file__))
    env = {**os.environ, "PYTHONPATH": package_root}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_the_task_process_does_not_import_an_http_stack():
    # the runner starts as a new interpreter for every task: httpx alone costs it ~0.15 s
    code = (
        "import sys, task_sdk.runner;"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore')], 'http'"
    )
    import task_sdk

    package_root = os.path.dirname(os.path.dirname(task_sdk.__file__))
    env = {**os.environ, "PYTHONPATH": package_root}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
