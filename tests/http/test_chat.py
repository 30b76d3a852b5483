"""samples/chat (built with the tree: BUILD/samples/chat/chat): the page
with its stable DOM, and the room: a message one WebSocket client sends
reaches the others, the event stream and a POST to /say join the same
room."""

import json

import pytest
import requests

from samples import make_sample  # noqa: F401 (the fixture)
from test_pubsub import Sub, pump
from wsclient import TEXT, WS


@pytest.fixture
def chat(make_sample):  # noqa: F811
    return make_sample("chat")


def test_page_has_the_stable_dom(chat):
    r = requests.get(chat.url + "/", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    for needle in ('<input id="msg"', '<button id="send"', '<ul id="log"', '<input id="name"'):
        assert needle in r.text


def test_a_message_from_one_client_reaches_the_others(chat):
    a, b, c = (WS(chat.host, chat.port, path="/ws") for _ in range(3))
    for w in (a, b, c):
        assert w.status == 101
    # the 101 leaves at the handler's first wait, after it subscribed
    sent = json.dumps({"name": "ann", "text": "hello, room"}).encode()
    a.send_message(TEXT, sent)
    for w in (b, c, a):
        assert w.recv_message() == (TEXT, sent)
    c.send_message(TEXT, "héllo".encode())
    for w in (a, b, c):
        assert w.recv_message() == (TEXT, "héllo".encode())
    for w in (a, b, c):
        w.close()


def test_say_and_events_share_the_room(chat):
    ws = WS(chat.host, chat.port, path="/ws")
    ev = Sub(chat, target="/events")
    pump([ev], lambda: "joined" in ev.comments)
    assert ws.status == 101
    r = requests.post(chat.url + "/say", data=b"from curl", timeout=5)
    assert r.status_code == 204
    assert ws.recv_message() == (TEXT, b"from curl")
    pump([ev], lambda: ev.data() == ["from curl"])
    assert requests.post(chat.url + "/say", data=b"", timeout=5).status_code == 400
    assert requests.post(chat.url + "/say", data=b"x" * 5000, timeout=5).status_code == 413
    ws.close()
    ev.close()
