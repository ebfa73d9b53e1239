"""Login throttling (``LOGIN_THROTTLE``, config.login_throttle): per user and client address,
then per address; a doubling wait, answered 429 with ``Retry-After`` and no password checked;
reset on success; on /auth/token, /auth/token/cli and the admin's login alike."""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from assets_app.models import LoginFailures
from assets_app.services.accounts import LoginKeys, login_failed, login_succeeded, login_wait

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-staple"  # a test user's


@pytest.fixture
def throttle(settings):
    settings.LOGIN_THROTTLE = {
        **settings.LOGIN_THROTTLE,
        "USER_FAILURES": 3,
        "ADDRESS_FAILURES": 6,
        "BASE_SECONDS": 2.0,
        "MAX_SECONDS": 60.0,
    }
    return settings.LOGIN_THROTTLE


def test_the_wait_starts_at_the_limit_and_doubles_up_to_the_most(throttle):
    keys = LoginKeys.of(username="data-eng", address="10.0.0.7")
    now = timezone.now()

    delays = [login_failed(keys, now=now) for _ in range(9)]

    assert delays[:2] == [0.0, 0.0]  # below USER_FAILURES
    assert delays[2:6] == [2.0, 4.0, 8.0, 16.0]
    assert delays[6:] == [32.0, 60.0, 60.0]  # MAX_SECONDS
    assert login_wait(keys, now=now) == 60.0
    assert login_wait(keys, now=now + timedelta(seconds=61)) == 0.0


def test_a_success_resets_the_users_count_not_the_addresss(throttle):
    guessed = LoginKeys.of(username="ops", address="10.0.0.7")
    for _ in range(3):
        login_failed(guessed)

    login_succeeded(guessed)

    assert not LoginFailures.objects.filter(key=guessed.user).exists()
    assert LoginFailures.objects.get(key=guessed.address).failures == 3


def test_one_address_guessing_many_users_is_slowed_by_its_own_count(throttle):
    now = timezone.now()
    for index in range(6):  # each user below its own limit of 3
        login_failed(LoginKeys.of(username=f"user{index}", address="10.0.0.9"), now=now)

    fresh_user = LoginKeys.of(username="never-tried", address="10.0.0.9")
    elsewhere = LoginKeys.of(username="never-tried", address="10.0.0.10")

    assert login_wait(fresh_user, now=now) == 2.0
    assert login_wait(elsewhere, now=now) == 0.0


def test_a_count_lapses_after_the_longest_wait(throttle):
    keys = LoginKeys.of(username="ops", address="10.0.0.7")
    start = timezone.now()
    for _ in range(3):
        login_failed(keys, now=start)

    later = login_failed(keys, now=start + timedelta(seconds=61))

    assert later == 0.0
    assert LoginFailures.objects.get(key=keys.user).failures == 1


def _token(client, path: str, username: str, password: str):
    return client.post(
        path, {"username": username, "password": password}, content_type="application/json"
    )


@pytest.mark.parametrize("path", ["/auth/token", "/auth/token/cli"])
def test_the_api_logins_answer_429_with_retry_after_and_check_no_password(
    client, throttle, path, monkeypatch
):
    User.objects.create_user("ops", password=PASSWORD)
    User.objects.create_user("analyst", password=PASSWORD)
    wrong = [_token(client, path, "ops", "guess").status_code for _ in range(3)]

    checks = []
    monkeypatch.setattr(User, "check_password", lambda self, raw: checks.append(raw))
    throttled = _token(client, path, "ops", PASSWORD)
    monkeypatch.undo()
    other = _token(client, path, "analyst", PASSWORD)

    assert wrong == [401, 401, 401]
    assert throttled.status_code == 429
    assert throttled["Retry-After"] == "2"
    assert throttled.json() == {
        "detail": "Too many failed logins for this user from this address; try again in 2 s"
    }
    assert checks == []  # the password was never hashed
    assert other.status_code == 201


def test_the_admin_login_is_throttled_too(client, throttle):
    User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
    form = {"username": "ops", "password": "guess", "next": "/admin/"}
    wrong = [client.post("/admin/login/", form).status_code for _ in range(3)]

    throttled = client.post("/admin/login/", {**form, "password": PASSWORD})

    assert wrong == [200, 200, 200]  # the form again, with Django's message
    assert throttled.status_code == 429
    assert throttled["Retry-After"] == "2"
    assert b"Too many failed logins" in throttled.content
    assert PASSWORD.encode() not in throttled.content
    assert "_auth_user_id" not in client.session


@pytest.mark.slow
def test_a_real_server_throttles_a_guesser_and_lets_the_user_in_after_the_wait(
    transactional_db, tmp_path
):
    """gunicorn with two processes (counts are shared through the database): many wrong
    passwords → 429, the right one after the wait → 201, another user unaffected."""
    from tests.live_server import start_server, stop_server

    User.objects.create_user("ops", password=PASSWORD)
    User.objects.create_user("analyst", password=PASSWORD)
    server = start_server(
        tmp_path,
        env={"LOGIN_THROTTLE_USER_FAILURES": "3", "LOGIN_THROTTLE_BASE_SECONDS": "5"},
    )
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:

            def login(username: str, password: str) -> httpx.Response:
                return http.post("/auth/token", json={"username": username, "password": password})

            codes = [login("ops", f"guess-{n}").status_code for n in range(8)]
            during = login("ops", PASSWORD)
            other = login("analyst", PASSWORD)
            time.sleep(int(during.headers["Retry-After"]) + 0.5)
            after = login("ops", PASSWORD)
    finally:
        stop_server(server)

    assert codes[:3] == [401, 401, 401]
    assert set(codes[3:]) == {429}
    assert during.status_code == 429
    assert int(during.headers["Retry-After"]) >= 2  # of 5, less the time the guesses took
    assert other.status_code == 201
    assert after.status_code == 201
    assert not LoginFailures.objects.filter(key__startswith="user:").exists()
