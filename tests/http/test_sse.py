"""Server-sent events through the handler API: names, ids, retry, data of
several lines split as the event-stream format wants, comments, and the
client's Last-Event-ID (the `events` handler of tests/http/modules/greet.c)."""

import time

import pytest

from rawhttp import request
from test_modules import greet_so  # noqa: F401 (the session fixture)
from test_wait import read_chunk


@pytest.fixture
def sserver(make_server, greet_so):  # noqa: F811
    return make_server(site="module %s\nsite {\n    handler /events events\n}\n" % greet_so)


def stream(server, headers=None):
    c = server.conn()
    c.send(request("GET", "/events", headers=headers or ()))
    deadline = time.monotonic() + 5
    head = c.read_until(b"\r\n\r\n", deadline)
    chunks = []
    while True:
        _, data = read_chunk(c, deadline)
        if not data:
            break
        chunks.append(data)
    c.close()
    return head, chunks


def parse(chunks):
    """Events as a browser's EventSource builds them: [(type, data, last id)]
    plus the retry time, following the WHATWG parsing rules."""
    events, retry, last_id = [], None, ""
    text = b"".join(chunks).decode()
    kind, data = "", []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data:
                events.append((kind or "message", "\n".join(data), last_id))
            kind, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            kind = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            last_id = value
        elif field == "retry" and value.isdigit():
            retry = int(value)
    return events, retry, last_id


def test_every_field_as_sent(sserver):
    head, chunks = stream(sserver)
    assert b"content-type: text/event-stream" in head.lower()
    # one chunk per call: the comment, the full event, the plain one, the id-only one, the end
    assert chunks[0] == b":keep-alive\n\n"
    assert chunks[1] == (b"event: update\nid: 7\nretry: 2500\n"
                         b"data: one\ndata: two\ndata: three\ndata: four\ndata: \n\n")
    assert chunks[2] == b"data: plain\n\n"
    assert chunks[3] == b"id: 8\n\n"
    assert len(chunks) == 5


def test_a_client_rebuilds_the_data_exactly(sserver):
    _, chunks = stream(sserver)
    events, retry, last_id = parse(chunks)
    # CRLF, LF and CR all end a line; the trailing line break survives
    assert events[0] == ("update", "one\ntwo\nthree\nfour\n", "7")
    assert events[1] == ("message", "plain", "7")
    assert events[2][0] == "end" and events[2][2] == "8"
    assert retry == 2500 and last_id == "8"


def test_names_and_ids_with_line_breaks_are_refused(sserver):
    _, chunks = stream(sserver)
    events, _, _ = parse(chunks)
    assert events[-1][1].endswith("refused: 1")
    assert not any("forged" in c.decode() for c in chunks)


def test_last_event_id_is_readable(sserver):
    _, chunks = stream(sserver, [("Last-Event-ID", "41")])
    assert parse(chunks)[0][-1][1] == "last: 41, refused: 1"
    _, chunks = stream(sserver)
    assert parse(chunks)[0][-1][1] == "last: none, refused: 1"
