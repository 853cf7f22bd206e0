# The master's own HTTP routes (master/links/routes.py) and the outcome-to-status map, both interpreters.
import asyncio

import master_rig as mf
from master.links import routes as _routes
from master.bus import body
from master.bus import outcome

UNIX_PORT = True


def test_routes_table():
    rig = mf.standard_rig()
    routes = _routes.start(rig.body, {})
    assert sorted(routes) == [("GET", "/menu"), ("GET", "/status"), ("POST", "/plan")], routes

    class Req:
        method = "POST"
        path = "/plan"
        headers = {}
        client = "127.0.0.1"
        content = b"{oops"

    status, obj, headers = asyncio.run(routes[("POST", "/plan")](Req()))
    assert status == 400 and obj["problems"][0].startswith("body: not JSON"), obj
    status, obj, headers = asyncio.run(routes[("GET", "/menu")](Req()))
    assert status == 200 and obj["protocol"] == 3, obj


def test_every_outcome_has_one_status():
    assert outcome.CODE == {
        body.ACCEPTED: 200,
        body.REPORT: 200,
        body.PROBLEMS: 422,
        body.UNREADABLE: 400,
        body.TOO_LARGE: 413,
    }, outcome.CODE
