"""The tests' one wait (tests/support/polling.py): a request that times out in its predicate
means "not yet" on a loaded machine, and only the wait's own bound fails it."""

from __future__ import annotations

import socket
import threading
import urllib.request

import pytest

from ..support.polling import wait_for

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


@pytest.fixture
def slow_then_answering():
    """A server that holds its first connection unanswered, then answers every other."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            if not held:
                held.append(connection)  # never answered: the client's read times out
                continue
            connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            )
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    listener.close()
    for connection in held:
        connection.close()


def test_it_asks_again_when_a_request_times_out(slow_then_answering):
    def answered() -> bytes:
        with urllib.request.urlopen(slow_then_answering, timeout=0.2) as answer:
            return answer.read()

    assert wait_for(answered, timeout=10, what="an answer") == b"ok"


def test_it_fails_at_its_bound_naming_the_last_timeout():
    def never() -> bool:
        raise TimeoutError("timed out")

    with pytest.raises(AssertionError, match="not within 0.1 s: an answer .*timed out"):
        wait_for(never, timeout=0.1, what="an answer")


def test_it_raises_any_other_error_at_once():
    def broken() -> bool:
        raise ConnectionRefusedError("refused")

    with pytest.raises(ConnectionRefusedError):
        wait_for(broken, timeout=5)
