"""An answer's head goes out with its body's first bytes (``HeldHead``), over a real TCP connection."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from zaqar_lite.server.gevent_worker import HeldHead

HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"


@pytest.fixture
def connection() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair of TCP sockets on the loopback: (the server's end, the client's end)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    with server, client:
        yield server, client


def arrived(client: socket.socket, wait: float = 0.2) -> bytes:
    """What has reached the client within ``wait`` seconds (b"" if nothing)."""
    data = b""
    while select.select([client], [], [], wait)[0]:
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
        wait = 0.05
    return data


def test_the_head_waits_for_the_body_and_goes_with_it(connection):
    server, client = connection
    answer = HeldHead(server)
    answer.sendall(HEAD)
    assert arrived(client) == b""  # gunicorn's own write would be on the wire now
    answer.sendall(b"hello")
    assert arrived(client) == HEAD + b"hello"


def test_writes_after_the_first_body_bytes_go_at_once(connection):
    server, client = connection
    answer = HeldHead(server)
    answer.sendall(HEAD)
    answer.sendall(b"he")
    assert arrived(client) == HEAD + b"he"
    answer.sendall(b"llo")
    assert arrived(client) == b"llo"


def test_an_answer_without_a_body_is_sent_when_the_request_ends(connection):
    server, client = connection
    answer = HeldHead(server)
    answer.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert arrived(client) == b""
    answer.flush()
    assert arrived(client) == b"HTTP/1.1 204 No Content\r\n\r\n"
    answer.flush()  # nothing held twice
    assert arrived(client, 0.05) == b""


def test_any_other_use_of_the_socket_sends_the_head_first(connection):
    server, client = connection
    answer = HeldHead(server)
    answer.sendall(HEAD)
    answer.send(b"hello")  # not held: what is held goes before it, in order
    assert arrived(client) == HEAD + b"hello"
    answer.shutdown(socket.SHUT_WR)
    assert client.recv(10) == b""


def test_nothing_written_nothing_sent(connection):
    server, client = connection
    answer = HeldHead(server)
    answer.flush()
    assert answer.getsockname() == server.getsockname()
    assert arrived(client, 0.05) == b""
