"""Every date the server writes or reads, with the server's clock set by
libfaketime (Debian `faketime`) to a day on each of the seven weekdays and
to the last seconds before a month, a year, a leap day and the day after
one: Date, Last-Modified, Expires, If-Modified-Since, If-Unmodified-Since,
If-Range and the access log's timestamp. So the suite no longer passes or
fails by the day it runs on (If-Range once failed on every Wednesday).

The server's clock starts at the chosen instant and runs on (FAKETIME
"@..."); its file times stay real (NO_FAKE_STAT), and every file the test
serves gets a modification time on each weekday before that instant. The
test's own clock is the real one: every expectation is computed from the
server's instant, never from time.time()."""

import calendar
import email.utils
import os
import re
import time
from pathlib import Path

import pytest

from conftest import WRAPPER
from fileshelp import files_site
from rawhttp import request

FAKETIME_LIBS = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
]

# (name, UTC instant the server's clock starts at, TZ of the server, the
# access log's offset in that zone)
WEEKDAYS = [("%s" % d, "2026-11-%02d 12:34:56" % (23 + i)) for i, d in enumerate(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])]
BOUNDARIES = [
    ("month_end", "2026-11-30 23:59:58"),
    ("year_end", "2026-12-31 23:59:58"),
    ("to_leap_day", "2028-02-28 23:59:58"),
    ("from_leap_day", "2028-02-29 23:59:58"),
]
# the access log is in local time: two runs in zones other than UTC
ZONES = {"thu": ("EST5", -5 * 3600), "year_end": ("UTC-14", 14 * 3600)}
# under valgrind (make check-memcheck) a start costs seconds: one weekday
# and one boundary there, every instant elsewhere
INSTANTS = [WEEKDAYS[2], BOUNDARIES[1]] if WRAPPER else WEEKDAYS + BOUNDARIES

LOG_RE = re.compile(rb'^\S+ - - \[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)\] "GET (\S+) HTTP/1.1" (\d{3}) ')
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def faketime_lib():
    for p in FAKETIME_LIBS:
        if os.path.exists(p):
            return p
    pytest.fail("libfaketime not found (Debian package faketime; make test-deps installs it): %s" % FAKETIME_LIBS)


def utc(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%d %H:%M:%S"))


def imf(t):
    return email.utils.formatdate(t, usegmt=True)


def parse_imf(s):
    """An IMF-fixdate, checked to be exactly what its instant formats to
    (so a wrong weekday name or a stray space fails)."""
    t = calendar.timegm(email.utils.parsedate(s))
    assert imf(t) == s, "malformed or inconsistent date %r (its instant formats as %r)" % (s, imf(t))
    return t


@pytest.fixture(params=INSTANTS, ids=[n for n, _ in INSTANTS])
def fake(request, make_server, tmp_path, monkeypatch):
    name, start = request.param
    t0 = utc(start)
    zone, offset = ZONES.get(name, ("UTC", 0))
    root = tmp_path / "dates"
    root.mkdir()
    # seven files, modified on each of the seven days before t0 at various
    # hours: every weekday's name appears in Last-Modified and If-*
    mtimes = {}
    for k in range(7):
        p = root / ("f%d.txt" % k)
        p.write_bytes(b"day %d\n" % k * 20)
        mt = t0 - (k + 1) * 86400 + k * 3671
        os.utime(p, (mt, mt))
        mtimes[p.name] = mt
    log = tmp_path / "access.log"
    monkeypatch.setenv("LD_PRELOAD", faketime_lib())
    # libfaketime reads "@Y-m-d H:M:S" in the server's zone
    monkeypatch.setenv("FAKETIME", "@" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0 + offset)))
    monkeypatch.setenv("NO_FAKE_STAT", "1")
    monkeypatch.setenv("TZ", zone)
    # ASan insists on coming first in the library list; libfaketime only
    # wraps the clock functions, which ASan does not intercept
    monkeypatch.setenv("ASAN_OPTIONS", (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":"))
    # one worker: the log's lines come in the order of the requests
    started = time.monotonic()
    srv = make_server(site=files_site(root, expires="1h"), access_log=str(log), threads="1")
    for k in ("LD_PRELOAD", "FAKETIME", "NO_FAKE_STAT", "TZ"):
        monkeypatch.delenv(k)
    srv.t0, srv.name_, srv.mtimes, srv.log, srv.offset = t0, name, mtimes, log, offset
    srv.started = started
    return srv


def get(srv, target, headers=()):
    with srv.conn() as c:
        c.send(request("GET", target, headers=list(headers)))
        return c.read_response()


def server_now(srv, r):
    """The Date of response r, which must lie between the fake start and
    the fake start plus the real time since (and a second of rounding).
    One second before the start too: libfaketime counts a coarse clock's
    time from a finer clock's reading at the start, so the server's first
    CLOCK_REALTIME_COARSE reading can fall a tick before the instant."""
    d = parse_imf(r.header("Date"))
    assert srv.t0 - 1 <= d <= srv.t0 + (time.monotonic() - srv.started) + 2, (r.header("Date"), imf(srv.t0))
    return d


def read_log(srv):
    assert srv.stop() == 0  # flushes the access log
    lines = srv.log.read_bytes().splitlines()
    out = []
    for line in lines:
        m = LOG_RE.match(line)
        assert m, "access log line not in Combined format: %r" % line
        dd, mon, yyyy, hh, mi, ss, sign, oh, om, target, status = m.groups()
        off = (int(oh) * 3600 + int(om) * 60) * (1 if sign == b"+" else -1)
        assert off == srv.offset, line
        local = calendar.timegm((int(yyyy), MONTHS.index(mon.decode()) + 1, int(dd), int(hh), int(mi), int(ss)))
        out.append((local - off, target.decode(), int(status)))
    return out


def test_dates_on_the_fake_day(fake):
    srv = fake
    dates = []
    for name, mt in sorted(srv.mtimes.items()):
        lm = imf(mt)
        r = get(srv, "/" + name)
        assert r.status == 200
        now = server_now(srv, r)
        dates.append((now, "/" + name))
        assert r.header("Last-Modified") == lm
        parse_imf(r.header("Last-Modified"))
        # Expires: the response's own Date plus the hour of `expires`
        assert parse_imf(r.header("Expires")) == now + 3600, (r.header("Date"), r.header("Expires"))
        assert r.header("Cache-Control") == "max-age=3600"
        cases = [
            ([("If-Modified-Since", lm)], 304),
            ([("If-Modified-Since", imf(mt - 1))], 200),
            ([("If-Modified-Since", imf(srv.t0))], 304),
            ([("If-Unmodified-Since", lm)], 200),
            ([("If-Unmodified-Since", imf(mt - 1))], 412),
            ([("Range", "bytes=0-3"), ("If-Range", lm)], 206),
            ([("Range", "bytes=0-3"), ("If-Range", imf(mt + 1))], 200),
            ([("Range", "bytes=0-3"), ("If-Range", imf(mt - 86400))], 200),
        ]
        for headers, want in cases:
            r = get(srv, "/" + name, headers)
            assert r.status == want, (name, headers, r.status)
            dates.append((server_now(srv, r), "/" + name))
            if want == 206:
                assert r.body == (b"day %d\n" % int(name[1]) * 20)[:4]
    logged = read_log(srv)
    assert len(logged) == len(dates)
    # each line's time is the second of its answer's Date (the log's clock is
    # read at the end of the answer: the same second, or the next one)
    for (d, target), (lt, ltarget, _) in zip(dates, logged):
        assert ltarget == target and d <= lt <= d + 1, (imf(d), imf(lt))


def test_dates_across_the_midnight(fake):
    """Requests on one connection until the server's clock has passed the
    midnight that the boundary runs start two seconds before (the start of
    a new second for the weekday runs), at most 4 s: Date never goes back
    and is well formed on both sides; the log's dates go with them."""
    srv = fake
    seen = []
    deadline = time.monotonic() + 4
    with srv.conn() as c:
        while time.monotonic() < deadline:
            c.send(request("GET", "/hello"))
            r = c.read_response()
            assert r.status == 200
            seen.append(server_now(srv, r))
            # a boundary run past its midnight; a weekday run past a second
            if seen[-1] >= (srv.t0 + 3 if srv.name_ in dict(BOUNDARIES) else seen[0] + 1):
                break
            time.sleep(0.05)
    assert seen == sorted(seen) and seen[-1] > seen[0]  # the cached Date moves on
    if srv.name_ in dict(BOUNDARIES):
        midnight = srv.t0 + 2
        assert seen[0] < midnight <= seen[-1], [imf(d) for d in seen[:: max(1, len(seen) // 5)]]
        # the new day's date names the new day
        after = [d for d in seen if d >= midnight][0]
        assert time.gmtime(after).tm_mday == 1 or srv.name_ == "to_leap_day"
        if srv.name_ == "to_leap_day":
            assert imf(after).startswith("Tue, 29 Feb 2028")
    logged = read_log(srv)
    assert len(logged) == len(seen)
    for d, (lt, target, status) in zip(seen, logged):
        assert target == "/hello" and status == 200 and d <= lt <= d + 1
