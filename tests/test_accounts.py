"""`studio users ...` end to end: the command line against the file a running studio serves."""

from __future__ import annotations

from contextlib import closing

import httpx

from tests.conftest import (
    ADA,
    BEN,
    lease_body,
    rows,
    scalar,
    sign_in,
    start_server,
    studio_command,
)

NEW_PASSWORD = "a-much-longer-passphrase"


def client_for(url: str, email: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=url, headers={"Accept": "application/json"}, timeout=30)
    reply = client.post("/login", json={"email": email, "password": password})
    assert reply.status_code == 200, reply.text
    return client


def test_users_add_makes_an_account_a_running_studio_signs_in(tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path)
    try:
        page = httpx.get(server.url + "/login").text
        assert f"studio users add you@example.com --db {db_path}" in page

        added = studio_command(db_path, "users", "add", "Cleo@Example.com", "--password-stdin",
                               input=NEW_PASSWORD + "\n")
        assert added.returncode == 0, added.stderr
        assert "Added cleo@example.com" in added.stdout
        assert scalar(db_path, "SELECT email FROM actors") == "cleo@example.com"
        # argon2id at its default cost (RFC 9106's second choice: 64 MiB, 3 passes, 4 lanes).
        assert scalar(db_path, "SELECT password_hash FROM actors").startswith(
            "$argon2id$v=19$m=65536,t=3,p=4$")
        with closing(client_for(server.url, "cleo@example.com", NEW_PASSWORD)) as client:
            assert client.get("/invoices").json() == []
        assert "studio users add" not in httpx.get(server.url + "/login").text

        again = studio_command(db_path, "users", "add", "cleo@example.com", "--password-stdin",
                               input="another-password\n")
        assert again.returncode == 1
        assert "already exists" in again.stderr
        assert scalar(db_path, "SELECT COUNT(*) FROM actors") == 1

        short = studio_command(db_path, "users", "add", "dan@example.com", "--password-stdin",
                               input="short\n")
        assert short.returncode == 1 and "at least 8 characters" in short.stderr
        no_terminal = studio_command(db_path, "users", "add", "dan@example.com")
        assert no_terminal.returncode == 1 and "--password-stdin" in no_terminal.stderr
        assert scalar(db_path, "SELECT COUNT(*) FROM actors") == 1
    finally:
        server.stop()


def test_users_list_shows_each_account_and_whether_it_is_disabled(tmp_path):
    db_path = tmp_path / "studio.db"
    empty = studio_command(db_path, "users", "list")
    assert empty.returncode == 0
    assert "No accounts yet" in empty.stdout and "studio users add" in empty.stdout
    server = start_server(db_path, "--demo")
    try:
        with closing(sign_in(server.url)):
            assert studio_command(db_path, "users", "disable", BEN).returncode == 0
            listed = studio_command(db_path, "users", "list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert [line.split()[:3] for line in lines] == [
            [ADA, "active", "1"], [BEN, "disabled", "0"]]
    finally:
        server.stop()


def test_users_disable_ends_a_live_session_and_expires_its_lease_at_once(tmp_path):
    db_path = tmp_path / "studio.db"
    # A slow provider keeps the lease open while the account is disabled.
    server = start_server(db_path, "--demo", STUDIO_PROVIDER_DELAY_S="30")
    try:
        with closing(sign_in(server.url)) as ada, closing(sign_in(server.url, BEN)) as ben:
            invoice = rows(db_path, "SELECT invoices.id FROM invoices JOIN actors ON actors.id ="
                                    " owner_id WHERE email = ?", ADA)[0][0]
            lease_id = ada.post("/leases", json=lease_body([invoice])).json()["lease_id"]
            assert scalar(db_path, "SELECT status FROM leases") == "open"

            disabled = studio_command(db_path, "users", "disable", ADA)
            assert disabled.returncode == 0, disabled.stderr
            assert "ended 1 session(s), expired 1 open lease(s)" in disabled.stdout

            assert ada.get("/invoices").status_code == 401
            assert ada.get(f"/leases/{lease_id}").status_code == 401
            lease = rows(db_path, "SELECT status, ended_reason FROM leases")[0]
            assert tuple(lease) == ("expired", "account_disabled")
            assert scalar(db_path, "SELECT COUNT(*) FROM sessions JOIN actors ON actors.id ="
                                   " actor_id WHERE email = ?", ADA) == 0
            assert scalar(db_path, "SELECT disabled_at FROM actors WHERE email = ?", ADA)
            again = httpx.post(server.url + "/login",
                               json={"email": ADA, "password": "studio-demo"})
            assert again.status_code == 403
            assert again.json()["detail"] == "account_disabled"
            assert ben.get("/invoices").status_code == 200  # another account is untouched

        unknown = studio_command(db_path, "users", "disable", "nobody@example.com")
        assert unknown.returncode == 1 and "no account for nobody@example.com" in unknown.stderr
    finally:
        server.stop()


def test_users_passwd_ends_the_other_sessions_and_the_new_password_signs_in(tmp_path):
    db_path = tmp_path / "studio.db"
    server = start_server(db_path, "--demo")
    try:
        with closing(sign_in(server.url)) as laptop, closing(sign_in(server.url)) as phone:
            assert scalar(db_path, "SELECT COUNT(*) FROM sessions") == 2
            changed = studio_command(db_path, "users", "passwd", ADA, "--password-stdin",
                                     input=NEW_PASSWORD + "\n")
            assert changed.returncode == 0, changed.stderr
            assert "ended 2 session(s)" in changed.stdout
            assert laptop.get("/invoices").status_code == 401
            assert phone.get("/invoices").status_code == 401
            assert scalar(db_path, "SELECT COUNT(*) FROM sessions") == 0
        old = httpx.post(server.url + "/login", json={"email": ADA, "password": "studio-demo"})
        assert old.status_code == 401
        with closing(client_for(server.url, ADA, NEW_PASSWORD)) as client:
            assert client.get("/invoices").status_code == 200
        unknown = studio_command(db_path, "users", "passwd", "nobody@example.com",
                                 "--password-stdin", input=NEW_PASSWORD + "\n")
        assert unknown.returncode == 1 and "no account" in unknown.stderr
    finally:
        server.stop()
