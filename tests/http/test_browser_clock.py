"""samples/clock in a real browser (headless Chromium, see browser.py): the
page's clock, fed by server-sent events, shows the time and advances."""

import re
import time

from browser import browser  # noqa: F401 (the fixture)
from samples import make_sample  # noqa: F401 (the fixture)

HMS = re.compile(r"^\d\d:\d\d:\d\d$")


def seconds(hms):
    h, m, s = map(int, hms.split(":"))
    return h * 3600 + m * 60 + s


def test_clock_advances_in_the_browser(browser, make_sample):  # noqa: F811
    app = make_sample("clock")
    page = browser()
    page.open(app.url + "/")
    first = page.wait_text("#clock", HMS.match, timeout=10)
    now = seconds(time.strftime("%H:%M:%S", time.gmtime()))
    assert abs((now - seconds(first) + 43200) % 86400 - 43200) <= 3, (first, now)
    assert page.text("#status").startswith("live"), page.dump()
    # it ticks: two more distinct times, each a second or two later
    shown = [first]
    for _ in range(2):
        shown.append(page.wait_text("#clock", lambda t: HMS.match(t) and t != shown[-1], timeout=4))
    steps = [(seconds(b) - seconds(a)) % 86400 for a, b in zip(shown, shown[1:])]
    assert all(1 <= s <= 2 for s in steps), shown


def test_a_missing_browser_is_named(monkeypatch):
    """Without Chromium the browser tests fail (never skip), saying what to install."""
    import browser as harness

    assert harness.missing() is None  # here, as under make test, it is installed
    monkeypatch.setattr(harness, "CHROMIUM", "/nonexistent/chromium")
    why = harness.missing()
    assert "/nonexistent/chromium" in why and "apt-get install chromium chromium-driver" in why
