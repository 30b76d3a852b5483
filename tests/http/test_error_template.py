"""error_template: error pages rendered by the Mustache engine from a file,
with {{status}}, {{reason}}, {{method}} and {{path}} (escaped)."""

import requests

from test_config_errors import check, listener, run_config

TEMPLATE = """<!doctype html>
<title>{{status}} {{reason}}</title>
<p class="err">{{method}} {{path}} failed with {{status}}</p>
"""


def test_error_pages_come_from_the_template(tmp_path, make_server):
    tpl = tmp_path / "error.mustache"
    tpl.write_text(TEMPLATE)
    s = make_server(error_template=str(tpl))
    base = "http://%s:%d" % (s.host, s.port)

    r = requests.get(base + "/no/such<thing>")
    assert r.status_code == 404
    assert r.headers["Content-Type"].startswith("text/html")
    assert "<title>404 Not Found</title>" in r.text
    # the path is user input: HTML-escaped by {{path}}
    assert 'GET /no/such&lt;thing&gt; failed with 404' in r.text
    assert "<thing>" not in r.text

    r = requests.post(base + "/hello", data=b"x")
    assert r.status_code == 405
    assert "POST /hello failed with 405" in r.text

    # a handler's own body wins over the template
    r = requests.get(base + "/hello")
    assert r.status_code == 200 and r.text == "Hello, World!"


def test_error_template_for_malformed_requests(tmp_path, make_server):
    tpl = tmp_path / "error.mustache"
    tpl.write_text(TEMPLATE)
    s = make_server(error_template=str(tpl))
    with s.conn() as c:
        c.send(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
        assert b"failed with 400" in r.body
        assert c.wait_closed(2.0)


def test_missing_template_is_a_config_error(tmp_path):
    conf, p = run_config(tmp_path, listener() + "error_template = %s\n" % (tmp_path / "nope.mustache"))
    check(p, conf, 2, "error_template", words=("nope.mustache",))


def test_broken_template_is_a_config_error_with_its_position(tmp_path):
    tpl = tmp_path / "broken.mustache"
    tpl.write_text("<h1>{{status}}</h1>\n{{#unclosed}}\n")
    conf, p = run_config(tmp_path, listener() + "error_template = %s\n" % tpl)
    check(p, conf, 2, "error_template", words=("broken.mustache:2:",))


def test_unknown_name_in_template_is_a_config_error(tmp_path):
    tpl = tmp_path / "typo.mustache"
    tpl.write_text("<h1>{{stauts}}</h1>\n")
    conf, p = run_config(tmp_path, listener() + "error_template = %s\n" % tpl)
    check(p, conf, 2, "error_template", words=("typo.mustache:1:", "stauts"))
