"""samples/clock over the wire: the page, and its event stream of the time
once a second (test_browser_clock.py watches the page in a real browser)."""

import re
import signal
import time

import requests

from rawhttp import request
from samples import make_sample  # noqa: F401 (the fixture)
from test_wait import open_stream, read_chunk

EVENT_RE = re.compile(rb"^id: (\d+)\n(retry: 1000\n)?data: (\d\d:\d\d:\d\d)\n\n$")


def read_event(c, deadline):
    """(arrival time, id, retry line present, data) of the next event."""
    t, data = read_chunk(c, deadline)
    m = EVENT_RE.match(data)
    assert m, data
    return t, int(m.group(1)), m.group(2) is not None, m.group(3).decode()


def test_page(make_sample):
    app = make_sample("clock")
    for path in ("/", "/index.html"):
        r = requests.get(app.url + path, timeout=5)
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert '<span id="clock">' in r.text
        assert "new EventSource('/events')" in r.text
    assert requests.get(app.url + "/nope", timeout=5).status_code == 404


def test_events_tell_the_time_each_second(make_sample):
    app = make_sample("clock")
    c, head = open_stream(app, "/events")
    try:
        h = head.lower()
        assert b"content-type: text/event-stream" in h and b"cache-control: no-cache" in h
        deadline = time.monotonic() + 8
        events = [read_event(c, deadline) for _ in range(4)]
    finally:
        c.close()
    # the first sets the reconnection delay, the others do not repeat it
    assert [e[2] for e in events] == [True, False, False, False]
    for _, sec, _, hms in events:
        assert hms == time.strftime("%H:%M:%S", time.gmtime(sec))
    ids = [e[1] for e in events]
    assert all(b > a for a, b in zip(ids, ids[1:])), ids
    assert abs(ids[-1] - time.time()) < 3, ids
    # after the first (at once), one a second: each just after a second begins
    gaps = [b[0] - a[0] for a, b in zip(events[1:], events[2:])]
    assert all(0.5 < g < 1.6 for g in gaps), gaps


def test_head_of_events(make_sample):
    app = make_sample("clock")
    with app.conn() as c:
        c.send(request("HEAD", "/events"))
        r = c.read_response(head_request=True)
    assert r.status == 200 and r.header("Content-Type") == "text/event-stream"


def test_stop_ends_every_stream(make_sample):
    app = make_sample("clock")
    streams = [open_stream(app, "/events")[0] for _ in range(3)]
    try:
        for c in streams:
            read_event(c, time.monotonic() + 5)
        t0 = time.monotonic()
        app.send_signal(signal.SIGTERM)
        for c in streams:  # the last chunk, then the close: no waiting out the second
            last = read_chunk(c, t0 + 2)[1]
            if EVENT_RE.match(last):  # an event already under way as the signal came
                last = read_chunk(c, t0 + 2)[1]
            assert last == b""
            assert c.wait_closed(2)
        assert app.wait(3) == 0, app.stderr()
        assert time.monotonic() - t0 < 2
    finally:
        for c in streams:
            c.close()
