"""The live-server fixture really serves the app from another process."""

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_server_process_serves_the_admin_login(server):
    response = httpx.get(f"{server.url}/admin/login/")
    assert response.status_code == 200
    assert "Django" in response.text
