"""application/x-www-form-urlencoded bodies through colibri_req_form()
(the `form` handler of tests/http/modules/greet.c)."""

import pytest

from rawhttp import chunked, request
from test_modules import greet_so  # noqa: F401 (the session fixture)

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def fserver(make_server, greet_so):  # noqa: F811
    return make_server(site="module %s\nsite {\n    handler /form form\n}\n" % greet_so,
                       max_request_body="1k")


def post(server, body, ctype=FORM, extra=()):
    headers = [("Content-Type", ctype)] if ctype else []
    with server.conn() as c:
        c.send(request("POST", "/form", headers=headers + list(extra), body=body))
        return c.read_response()


def test_fields_are_decoded(fserver):
    r = post(fserver, b"name=Ada+Lovelace&note=1%2B1%3D2%20%26%20more")
    assert r.status == 200 and r.body == b"name=[Ada Lovelace] note=[1+1=2 & more]"


def test_absent_and_empty_fields(fserver):
    assert post(fserver, b"name=&other=x").body == b"name=[] note=[-]"
    assert post(fserver, b"note").body == b"name=[-] note=[]"


def test_content_type_with_parameters_and_case(fserver):
    r = post(fserver, b"name=x", ctype="Application/X-WWW-Form-Urlencoded; charset=utf-8")
    assert r.body == b"name=[x] note=[-]"


@pytest.mark.parametrize("ctype", ["text/plain", "multipart/form-data; boundary=x",
                                   "application/x-www-form-urlencodedX", None])
def test_not_a_form_has_no_fields(fserver, ctype):
    assert post(fserver, b"name=x", ctype=ctype).body == b"name=[-] note=[-]"


def test_bad_escape_is_no_value(fserver):
    assert post(fserver, b"name=%zz&note=ok").body == b"name=[-] note=[ok]"


def test_chunked_form(fserver):
    with fserver.conn() as c:
        c.send(b"POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: " + FORM.encode() +
               b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b"name=a", b"b&note=c"))
        assert c.read_response().body == b"name=[ab] note=[c]"


def test_form_over_the_limit_is_413(fserver):
    r = post(fserver, b"name=" + b"x" * 2000)
    assert r.status == 413
