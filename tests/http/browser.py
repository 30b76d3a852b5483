"""A real browser for the black-box tests: Debian's Chromium, headless,
driven with selenium through Debian's /usr/bin/chromedriver (both from
`scripts/deps.sh test`, which `make test` runs; nothing is downloaded).

Use it through the `browser` fixture, a factory of pages:

    from browser import browser  # noqa: F401 (the fixture)
    from samples import make_sample  # noqa: F401

    def test_two_pages(browser, make_sample):
        app = make_sample("chat")
        alice, bob = browser(), browser()     # two independent browsers
        alice.open(app.url + "/")
        bob.open(app.url + "/")
        alice.type("#msg", "hello\\n")     # keys; "\\n" presses Enter
        bob.wait_text("#log", lambda t: "hello" in t)

Each call starts its own headless Chromium with a fresh profile (no shared
cookies or storage), loopback only: no proxy, no host name resolves but
localhost, no background, sync, update or QUIC traffic. Every page is quit
at teardown. For anything the helpers lack, `page.driver` is the selenium
WebDriver. When Chromium or chromedriver is missing, the fixture fails with
the command that installs them: these tests must run, never skip.

Failure messages from wait_text() include the page's DOM and the browser's
console (JavaScript errors show up there)."""

import shutil
import tempfile
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-proxy-server",
    # every host name but the loopback ones fails to resolve
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE ::1",
]
START_TRIES = 2  # chromedriver start-up can time out on a loaded machine


def missing():
    """What is not installed, as a message, or None."""
    gone = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if gone:
        return ("%s not found: install Debian's chromium and chromium-driver "
                "(make test-deps, or apt-get install chromium chromium-driver)" % ", ".join(gone))
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "python selenium missing: make test-deps (tests/requirements.txt)"
    return None


class Page:
    """One headless Chromium showing one page."""

    def __init__(self, profile, log_path, flags=()):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for f in FLAGS + list(flags) + ["--user-data-dir=%s" % profile]:
            opts.add_argument(f)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # an explicit chromedriver: selenium then never looks for one to download
        service = Service(executable_path=CHROMEDRIVER, log_output=str(log_path))
        self.driver = webdriver.Chrome(service=service, options=opts)
        self.driver.set_page_load_timeout(15)

    def open(self, url):
        self.driver.get(url)

    def element(self, css):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def text(self, css):
        """The text of the first element matching css ("" if none)."""
        from selenium.common.exceptions import NoSuchElementException

        try:
            return self.element(css).text
        except NoSuchElementException:
            return ""

    def type(self, css, keys):
        self.element(css).send_keys(keys.replace("\n", "\ue007"))  # Enter

    def click(self, css):
        self.element(css).click()

    def wait_text(self, css, pred, timeout=5.0):
        """Polls the element's text until pred(text) holds; returns the text.
        Fails with the page's DOM and console after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.text(css)
            if pred(t):
                return t
            if time.monotonic() > deadline:
                pytest.fail("after %.1f s, %s shows %r\n%s" % (timeout, css, t, self.dump()))
            time.sleep(0.05)

    def console(self):
        try:
            return ["%s %s" % (e["level"], e["message"]) for e in self.driver.get_log("browser")]
        except Exception as e:  # a dead browser has no log to give
            return ["(no console: %s)" % e]

    def dump(self):
        try:
            dom = self.driver.page_source
        except Exception as e:
            dom = "(no DOM: %s)" % e
        return "DOM:\n%s\nconsole:\n%s" % (dom[:4000], "\n".join(self.console()))

    def quit(self):
        self.driver.quit()


@pytest.fixture
def browser(tmp_path):
    why = missing()
    if why:
        pytest.fail(why, pytrace=False)
    pages, dirs = [], []

    def make(flags=()):
        """flags: more Chromium switches (--ignore-certificate-errors for a
        test certificate)."""
        log = tmp_path / ("chromedriver%d.log" % len(pages))
        for attempt in range(START_TRIES):
            profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
            dirs.append(profile)
            try:
                page = Page(profile, log, flags)
                break
            except Exception as e:
                if attempt + 1 == START_TRIES:
                    detail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                    pytest.fail("Chromium did not start: %s\n%s" % (e, detail), pytrace=False)
        pages.append(page)
        return page

    yield make
    for p in pages:
        try:
            p.quit()
        except Exception:
            pass  # a browser that died has nothing left to stop
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
