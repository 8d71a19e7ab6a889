"""`detektiv serve`'s pure rules: which addresses are loopback, what a tab's process is given."""

from __future__ import annotations

from tui.serve.server import is_loopback, tab_environment


def test_only_loopback_addresses_count_as_loopback() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "192.168.1.5", "10.0.0.1", "::", "example.com", "localhost.evil"):
        assert not is_loopback(host), host


def test_a_tab_gets_only_what_the_app_needs() -> None:
    env = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C.UTF-8", "DETEKTIV_HOME": "/d",
           "OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "sk-2", "AWS_SECRET_ACCESS_KEY": "x",
           "GITHUB_TOKEN": "y"}
    given = tab_environment(env, ["OPENAI_API_KEY"], {"DETEKTIV_SERVED": "1"})
    assert given == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C.UTF-8", "DETEKTIV_HOME": "/d",
                     "OPENAI_API_KEY": "sk-1", "DETEKTIV_SERVED": "1"}
