"""samples/chat in a real browser (headless Chromium, see browser.py): two
pages in two independent browsers join the room; a message typed in one
appears in the other, once, with its sender's name, and as text only."""

from browser import browser  # noqa: F401 (the fixture)
from samples import make_sample  # noqa: F401 (the fixture)


def items(page):
    """The texts of the #log entries, in order."""
    return [li.text for li in page.driver.find_elements("css selector", "#log li")]


def test_a_message_from_one_page_appears_in_the_other(browser, make_sample):  # noqa: F811
    app = make_sample("chat")
    alice, bob = browser(), browser()
    for page in (alice, bob):
        page.open(app.url + "/")
        page.wait_text("#status", lambda t: t == "connected", timeout=10)
    alice.type("#name", "alice")
    alice.type("#msg", "hello from alice\n")  # Enter sends
    bob.wait_text("#log", lambda t: "hello from alice" in t, timeout=10)
    # the name is in a <b> of its own, the text follows it
    assert items(bob) == ["alice:hello from alice"], bob.dump()
    # the sender sees its own message too, and the input is cleared
    alice.wait_text("#log", lambda t: "hello from alice" in t)
    assert alice.element("#msg").get_attribute("value") == ""

    # the other way, with the button, and markup shown as text
    bob.type("#name", "bob")
    bob.type("#msg", "<b>not bold</b>")
    bob.click("#send")
    alice.wait_text("#log", lambda t: "<b>not bold</b>" in t, timeout=10)
    assert items(alice) == ["alice:hello from alice", "bob:<b>not bold</b>"], alice.dump()
    assert alice.driver.find_elements("css selector", "#log li b")[-1].text == "bob:"
