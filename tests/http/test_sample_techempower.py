"""samples/techempower held to the TechEmpower Framework Benchmarks rules:
exact bodies, the Server and Date headers, Content-Type and Content-Length,
JSON shapes and ranges, the clamping of `queries`, and the fortunes page
(the extra fortune, the order by message, HTML escaping). The database is
checked with Python's own sqlite3 where it matters."""

import concurrent.futures
import email.utils
import html
import json
import sqlite3
import subprocess
import time
from html.parser import HTMLParser

import pytest
import requests

from rawhttp import request
from samples import make_sample, sample_bin  # noqa: F401 (the fixture)

FORTUNES = [
    "fortune: No such file or directory",
    "A computer scientist is someone who fixes things that aren't broken.",
    "After enough decimal places, nobody gives a damn.",
    "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    "A computer program does what you tell it to do, not what you want it to do.",
    "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen",
    "Any program that runs right is obsolete.",
    "A list is only as strong as its weakest link. \u2014 Donald Knuth",
    "Feature: A bug with seniority.",
    "Computers make very fast, very accurate mistakes.",
    '<script>alert("This should not be displayed in a browser alert box.");</script>',
    "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af",
]
EXTRA = "Additional fortune added at request time."


@pytest.fixture
def app(make_sample, tmp_path):
    """The sample on its own database file (the test reads it too)."""
    s = make_sample("techempower", "-t", "2", "-d", tmp_path / "world.db")
    s.db = tmp_path / "world.db"
    return s


def world(db):
    with sqlite3.connect(db) as c:
        return dict(c.execute("SELECT id, randomNumber FROM World"))


def get(app, target):
    with app.conn() as c:
        c.send(request("GET", target))
        return c.read_response()


def check_headers(r, content_type):
    """What every answer must carry: Server, a current Date, the type, the
    length (no chunking)."""
    assert r.status == 200, r
    assert r.header("Server") == "colibri"
    date = email.utils.parsedate_to_datetime(r.header("Date"))
    assert abs(date.timestamp() - time.time()) < 5, r.header("Date")
    assert r.header("Content-Type") == content_type
    assert r.header("Content-Length") == str(len(r.body))
    assert r.header("Transfer-Encoding") is None


def check_world_row(o):
    assert isinstance(o, dict) and list(o) == ["id", "randomNumber"], o
    assert all(type(v) is int for v in o.values()), o
    assert 1 <= o["id"] <= 10000 and 1 <= o["randomNumber"] <= 10000, o


def test_plaintext(app):
    r = get(app, "/plaintext")
    check_headers(r, "text/plain")
    assert r.body == b"Hello, World!"


def test_plaintext_pipelined(app):
    """The benchmark sends 16 requests at a time on one connection."""
    with app.conn() as c:
        c.send(request("GET", "/plaintext") * 16)
        for _ in range(16):
            r = c.read_response()
            check_headers(r, "text/plain")
            assert r.body == b"Hello, World!"


def test_json(app):
    r = get(app, "/json")
    check_headers(r, "application/json")
    assert r.body == b'{"message":"Hello, World!"}'


def test_db_is_one_random_row_of_the_database(app):
    rows = world(app.db)
    assert len(rows) == 10000 and set(rows) == set(range(1, 10001))
    ids = set()
    for _ in range(30):
        r = get(app, "/db")
        check_headers(r, "application/json")
        o = json.loads(r.body)
        check_world_row(o)
        assert rows[o["id"]] == o["randomNumber"], o
        ids.add(o["id"])
    assert len(ids) >= 25, ids  # random ids: 30 draws of 10000 rarely repeat


@pytest.mark.parametrize("query,count", [
    ("", 1), ("?queries=", 1), ("?queries=foo", 1), ("?queries=0", 1), ("?queries=-3", 1),
    ("?queries=1.5", 1), ("?queries=1", 1), ("?queries=7", 7), ("?queries=20", 20),
    ("?queries=500", 500), ("?queries=501", 500), ("?queries=99999999999999999999", 500),
])
def test_queries_count_is_clamped(app, query, count):
    rows = world(app.db)
    r = get(app, "/queries" + query)
    check_headers(r, "application/json")
    a = json.loads(r.body)
    assert isinstance(a, list) and len(a) == count  # an array, even of one
    for o in a:
        check_world_row(o)
        assert rows[o["id"]] == o["randomNumber"], o


@pytest.mark.parametrize("query,count", [("?queries=foo", 1), ("?queries=5", 5), ("?queries=501", 500)])
def test_updates_write_new_numbers(app, query, count):
    before = world(app.db)
    r = get(app, "/updates" + query)
    check_headers(r, "application/json")
    a = json.loads(r.body)
    assert isinstance(a, list) and len(a) == count
    after = world(app.db)
    last = {}
    for o in a:
        check_world_row(o)
        last[o["id"]] = o["randomNumber"]
    for i, n in last.items():
        assert after[i] == n, (i, n, after[i])  # written, and what the answer says
        assert before[i] != n, i  # a new number
    assert all(after[i] == before[i] for i in before if i not in last)


class Table(HTMLParser):
    """The (id, message) rows of the fortunes table, decoded."""

    def __init__(self):
        super().__init__()
        self.rows, self.cell, self.cells = [], None, []

    def handle_starttag(self, tag, attrs):
        if tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self.cells.append(self.cell)
            self.cell = None
        elif tag == "tr" and self.cells:
            self.rows.append((int(self.cells[0]), self.cells[1]))
            self.cells = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def fortunes_page(rows):
    """The page as the benchmark's reference gives it, escaped as Mustache
    escapes ({{x}}: & < > " and ' as &#39;)."""
    body = "".join("<tr><td>%d</td><td>%s</td></tr>" % (i, html.escape(m).replace("&#x27;", "&#39;"))
                   for i, m in sorted(rows, key=lambda r: r[1].encode()))
    return ("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
            "<tr><th>id</th><th>message</th></tr>%s</table></body></html>" % body).encode()


def test_fortunes(app):
    r = get(app, "/fortunes")
    check_headers(r, "text/html; charset=utf-8")
    rows = list(enumerate(FORTUNES, 1)) + [(0, EXTRA)]
    assert r.body == fortunes_page(rows)
    # the same, read as a browser would: escaped, sorted, the extra one in
    t = Table()
    t.feed(r.body.decode("utf-8"))
    assert sorted(t.rows) == sorted(rows)
    assert [m for _, m in t.rows] == sorted((m for _, m in rows), key=str.encode)
    assert b"<script>" not in r.body and b"&lt;script&gt;alert(&quot;This should" in r.body
    assert t.rows[0][0] == 11 and t.rows[-1][0] == 12  # '<' first; the Japanese one last


def test_fortunes_come_from_the_database(make_sample, tmp_path):
    """A database made elsewhere: its fortunes, not built-in ones, with the
    extra one still added per request."""
    db = tmp_path / "mine.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE World (id INTEGER PRIMARY KEY, randomNumber INTEGER NOT NULL)")
        c.executemany("INSERT INTO World VALUES (?, ?)", ((i, 42) for i in range(1, 10001)))
        c.execute("CREATE TABLE Fortune (id INTEGER PRIMARY KEY, message TEXT NOT NULL)")
        c.executemany("INSERT INTO Fortune VALUES (?, ?)",
                      [(1, "zebra & 'quotes'"), (2, "Apple <b>"), (3, "apple")])
    app = make_sample("techempower", "-t", "1", "-d", db)
    for _ in range(2):  # twice: the extra fortune is not left in the table or the buffers
        r = get(app, "/fortunes")
        assert r.body == fortunes_page([(1, "zebra & 'quotes'"), (2, "Apple <b>"), (3, "apple"), (0, EXTRA)])
    assert json.loads(get(app, "/db").body)["randomNumber"] == 42


def test_a_temporary_database_is_removed_at_exit(make_sample, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    app = make_sample("techempower", "-t", "1", env={"TMPDIR": str(tmp)})
    assert get(app, "/db").status == 200
    made = list(tmp.iterdir())
    assert len(made) == 1 and (made[0] / "world.db").exists(), made
    assert app.stop() == 0
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("setup,message", [
    ("CREATE TABLE World (id INTEGER PRIMARY KEY, number INTEGER)", "randomNumber"),
    ("CREATE TABLE World (id INTEGER PRIMARY KEY, randomNumber INTEGER);"
     "INSERT INTO World VALUES (1, 1)", "rows 1..10000"),
])
def test_a_database_of_another_shape_stops_the_start(tmp_path, setup, message):
    db = tmp_path / "bad.db"
    with sqlite3.connect(db) as c:
        c.executescript(setup)
    p = subprocess.run([str(sample_bin("techempower")), "-d", str(db), "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and str(db) in p.stderr and message in p.stderr, p.stderr


def test_bad_command_line(tmp_path):
    for args in (["-t", "x"], ["-q"], ["a:1", "b:2"]):
        p = subprocess.run([str(sample_bin("techempower"))] + args, capture_output=True, text=True,
                           timeout=10)
        assert p.returncode == 2 and "techempower" in p.stderr, (args, p.stderr)


def test_many_clients_at_once(app):
    """Both worker threads, each on its own connection, and the writers
    taking turns: every answer right."""
    def client(i):
        with requests.Session() as s:
            for path in ("/db", "/queries?queries=5", "/updates?queries=5", "/fortunes") * 5:
                r = s.get(app.url + path, timeout=20)
                assert r.status_code == 200, (path, r.status_code)
        return i

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert sorted(ex.map(client, range(8))) == list(range(8))
