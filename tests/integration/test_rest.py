"""The REST control API (issue 19, docs/control.md) against the real daemon on loopback, with a
plain HTTP client (http.client, ssl) reading the OpenAPI document the daemon serves: the document
is valid OpenAPI 3 (openapi-spec-validator), every route of it answers as it says (status codes,
content types, bodies validated against its schemas with jsonschema), the routes that change
state need a bearer token from http.token_file, a binding beyond localhost without one is
refused, TLS works with a certificate made here by openssl (and plain HTTP then fails), and the
writer's target set over REST (or the ZeroMQ `writer` command) names the next series' file."""
import http.client
import json
import os
import socket
import ssl
import subprocess
import time

import jsonschema
import pytest
import yaml
from openapi_spec_validator import validate

import test_daemon as td
from test_daemon import LONG, Sender, daemons, free_port, frames, tmpdir_  # noqa: F401

TOKEN = "s3cret-token-0123456789abcdef"


def token_file(folder, text=None, mode=0o600):
    path = os.path.join(folder, "tokens")
    with open(path, "w") as f:
        f.write(text if text is not None else "# operators\nbluesky:%s\n" % TOKEN)
    os.chmod(path, mode)
    return path


def http_extra(port, tokens=None, host="127.0.0.1", tls=None, root=None, writer_dir=None):
    text = 'http:\n  endpoint: "%s:%d"\n' % (host, port)
    if tokens:
        text += "  token_file: %s\n" % tokens
    if tls:
        text += "  tls_cert: %s\n  tls_key: %s\n" % tls
    if root or writer_dir:
        text += "writer:\n"
        if root:
            text += "  root: %s\n" % root
        if writer_dir:
            text += "  directory: %s\n" % writer_dir
    return text


def call(port, method, path, body=None, token=None, ctype="application/json", conn=None,
         raw=False):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    headers = {}
    if token:
        headers["Authorization"] = "Bearer " + token
    if body is not None:
        headers["Content-Type"] = ctype
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    if raw:
        return r.status, r.getheader("Content-Type"), data
    return r.status, r.getheader("Content-Type"), (json.loads(data) if data else None)


def check_schema(doc, name, body):
    """body against the document's schema `name` (its $refs resolved inside the document)."""
    schema = {"$ref": "#/components/schemas/" + name, "components": doc["components"]}
    jsonschema.validate(body, schema)


@pytest.fixture
def rest(daemons, tmpdir_):
    port = free_port()
    out = os.path.join(tmpdir_, "out")
    os.makedirs(out)
    d = daemons(extra=http_extra(port, token_file(tmpdir_), writer_dir=out))
    d.http_port = port
    d.out = out
    return d


def test_openapi_valid_and_every_route_answers_as_documented(rest, tmpdir_):
    port = rest.http_port
    code, ctype, doc = call(port, "GET", "/api/v1/openapi.json")
    assert code == 200 and ctype == "application/json"
    validate(doc)  # OpenAPI 3.0 (raises on an invalid document)
    routes = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    assert routes == {("GET", "/api/v1/status"), ("GET", "/api/v1/devices"),
                      ("GET", "/api/v1/aggregates"), ("GET", "/api/v1/config"),
                      ("PUT", "/api/v1/config"), ("POST", "/api/v1/reset"),
                      ("POST", "/api/v1/stop"), ("GET", "/api/v1/writer"),
                      ("PUT", "/api/v1/writer"), ("GET", "/api/v1/openapi.json")}
    sub = os.path.join(rest.out, "scan")
    os.makedirs(sub)
    cfg_file = rest.config
    bodies = {
        ("PUT", "/api/v1/config"): {"path": cfg_file},
        ("PUT", "/api/v1/writer"): {"directory": sub, "prefix": "scan7_"},
    }
    for method, path in sorted(routes, key=lambda r: r[1] == "/api/v1/stop"):
        op = doc["paths"][path][method.lower()]
        token = TOKEN if {"bearer": []} in op["security"] else None
        code, ctype, body = call(port, method, path, bodies.get((method, path)), token=token)
        assert str(code) in op["responses"], (method, path, code, body)
        assert code == 200, (method, path, body)
        content = op["responses"]["200"]["content"]
        assert ctype in content, (method, path, ctype)
        ref = content[ctype]["schema"]["$ref"].rsplit("/", 1)[1]
        check_schema(doc, ref, body)
        if op["security"] == [{"bearer": []}]:
            # every state-changing route: no token is 401 with a challenge, a wrong one too
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
            c.request(method, path)
            r = c.getresponse()
            prob = json.loads(r.read())
            assert r.status == 401 and r.getheader("WWW-Authenticate", "").startswith("Bearer")
            assert r.getheader("Content-Type") == "application/problem+json"
            check_schema(doc, "Problem", prob)
            assert call(port, method, path, token="x" * len(TOKEN))[0] == 401
    # the stop route stopped the daemon (last of the loop)
    assert rest.proc.wait(LONG) == 0
    assert "stop requested" in rest.logtext()


def test_status_config_and_writer_match_control(rest, tmpdir_):
    port = rest.http_port
    code, _, st = call(port, "GET", "/api/v1/status")
    ctl = rest.status()
    assert code == 200 and set(ctl) == set(st)  # the same keys as the control socket's
    code, _, cfg = call(port, "GET", "/api/v1/config")
    creq = rest.request({"cmd": "config"})
    assert cfg["yaml"] == creq["config"] and cfg["source"] == creq["source"]
    assert cfg["config_hash"] == ctl["config_hash"]
    code, _, devs = call(port, "GET", "/api/v1/devices")
    assert [x["name"] for x in devs["devices"]] == [x["name"] for x in ctl["devices"]]
    # reload from a YAML body: a new setup version; from a JSON body likewise
    v0 = ctl["setup_version"]
    yaml_text = cfg["yaml"].replace("npt: 64", "npt: 48")
    assert yaml_text != cfg["yaml"]
    code, ctype, r = call(port, "PUT", "/api/v1/config", yaml_text, token=TOKEN,
                          ctype="application/yaml")
    assert code == 200 and r["setup_version"] > v0, r
    assert rest.request({"cmd": "config", "key": "integration.npt"})["value"] == "48"
    # the same configuration as a JSON object
    as_json = yaml.safe_load(yaml_text)
    as_json["integration"]["npt"] = 40
    code, ctype, r2 = call(port, "PUT", "/api/v1/config", as_json, token=TOKEN)
    assert code == 200 and r2["setup_version"] > r["setup_version"], r2
    assert rest.request({"cmd": "config", "key": "integration.npt"})["value"] == "40"
    # a bad value: problem+json naming the key; nothing changes
    bad = yaml_text.replace("npt: 48", "npt: -3")  # (the -3 on the YAML text: still npt 40)
    code, ctype, p = call(port, "PUT", "/api/v1/config", bad, token=TOKEN,
                          ctype="application/yaml")
    assert code == 422 and ctype == "application/problem+json", p
    assert p["key"] == "integration.npt" and p["status"] == 422 and "npt" in p["detail"]
    code, ctype, p = call(port, "PUT", "/api/v1/config", b"{nope", token=TOKEN)
    assert code == 400 and ctype == "application/problem+json"
    code, ctype, p = call(port, "PUT", "/api/v1/config", b"x", token=TOKEN, ctype="text/plain")
    assert code == 415
    # writer: REST and ZeroMQ share the target
    code, _, w = call(port, "GET", "/api/v1/writer")
    assert code == 200 and w["directory"] == rest.out and w["prefix"] == ""
    r = rest.request({"cmd": "writer", "prefix": "zmq_"})
    assert r["ok"] and r["prefix"] == "zmq_"
    assert call(port, "GET", "/api/v1/writer")[2]["prefix"] == "zmq_"
    for body, key in (({"prefix": "../up"}, "prefix"), ({"prefix": "a/b"}, "prefix"),
                      ({"directory": "relative"}, "directory"),
                      ({"directory": "/nonexistent/x"}, "directory"), ({"prefix": 7}, "prefix")):
        code, ctype, p = call(port, "PUT", "/api/v1/writer", body, token=TOKEN)
        assert code == 422 and ctype == "application/problem+json" and p["key"] == key, (body, p)
    r = rest.request({"cmd": "writer", "prefix": "../x"})
    assert not r["ok"] and "prefix" in r["error"]
    assert call(port, "GET", "/api/v1/writer")[2]["prefix"] == "zmq_"  # unchanged
    # unknown route and method
    code, ctype, p = call(port, "GET", "/api/v1/nope")
    assert code == 404 and ctype == "application/problem+json"
    code, ctype, p = call(port, "PUT", "/api/v1/nope", {"with": "a body"}, token=TOKEN)
    assert code == 404 and ctype == "application/problem+json"
    code, ctype, p = call(port, "DELETE", "/api/v1/writer", {"with": "a body"}, token=TOKEN)
    assert code == 405
    assert rest.terminate() == 0


def test_writer_target_names_the_next_series_file(rest):
    port = rest.http_port
    sub = os.path.join(rest.out, "scan42")
    os.makedirs(sub)
    code, _, w = call(port, "PUT", "/api/v1/writer", {"directory": sub, "prefix": "scan42_"},
                      token=TOKEN)
    assert code == 200 and w["directory"] == sub and w["prefix"] == "scan42_"
    tx = Sender(rest)
    tx.start(series_id=3, series_unique_id="run")
    for i, img in enumerate(frames(2)):
        tx.image(i, img, series_id=3)
    tx.end(series_id=3)
    path = os.path.join(sub, "scan42_run.h5")
    t_end = time.monotonic() + LONG
    while time.monotonic() < t_end and not (
            os.path.exists(path) and rest.status()["writer"]["files_written"] >= 1):
        time.sleep(0.05)
    assert os.path.exists(path), (os.listdir(sub), os.listdir(rest.out))
    assert os.listdir(rest.out) == ["scan42"]  # nothing in writer.directory itself
    assert rest.terminate() == 0


def test_writer_root_confines_the_directory(daemons, tmpdir_):
    port = free_port()
    root = os.path.join(tmpdir_, "root")
    os.makedirs(os.path.join(root, "inside"))
    os.makedirs(os.path.join(tmpdir_, "outside"))
    os.symlink(os.path.join(tmpdir_, "outside"), os.path.join(root, "link"))
    d = daemons(extra=http_extra(port, token_file(tmpdir_), root=root))
    ok = call(port, "PUT", "/api/v1/writer", {"directory": os.path.join(root, "inside")},
              token=TOKEN)
    assert ok[0] == 200
    for bad in (os.path.join(tmpdir_, "outside"), os.path.join(root, "link"),
                os.path.join(root, "inside", "..", "..", "outside")):
        code, _, p = call(port, "PUT", "/api/v1/writer", {"directory": bad}, token=TOKEN)
        assert code == 422 and p["key"] == "directory" and "writer.root" in p["detail"], p
    assert d.terminate() == 0


def test_tokens_required_and_file_checked(daemons, tmpdir_):
    port = free_port()
    # no token file: reading works on localhost, changing state is 403
    d = daemons(extra=http_extra(port))
    assert call(port, "GET", "/api/v1/status")[0] == 200
    code, ctype, p = call(port, "POST", "/api/v1/reset", token=TOKEN)
    assert code == 403 and "token_file" in p["detail"]
    assert d.terminate() == 0
    # beyond localhost without tokens: refused at start, naming the option
    cfg = os.path.join(tmpdir_, "open.yaml")
    ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, extra=http_extra(free_port(), host="0.0.0.0")))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "http.token_file" in r.stderr, r.stderr[-2000:]
    # a token file others can read: refused at start
    loose = token_file(tmpdir_, mode=0o644)
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, extra=http_extra(free_port(), tokens=loose)))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "owner only" in r.stderr, r.stderr[-2000:]
    # a short token: refused, naming the line, without echoing it
    short = token_file(tmpdir_, text="ok:%s\nshorty\n" % TOKEN)
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, extra=http_extra(free_port(), tokens=short)))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "line 2" in r.stderr and "shorty" not in r.stderr
    # with tokens, beyond localhost: served; a read from the network address needs a token too
    port = free_port()
    d = daemons(extra=http_extra(port, token_file(tmpdir_), host="0.0.0.0"))
    assert call(port, "POST", "/api/v1/reset", token=TOKEN)[0] == 200
    assert call(port, "POST", "/api/v1/reset")[0] == 401
    addr = local_address()
    if addr:
        c = http.client.HTTPConnection(addr, port, timeout=LONG)
        assert call(port, "GET", "/api/v1/status", conn=c)[0] == 401
        c = http.client.HTTPConnection(addr, port, timeout=LONG)
        assert call(port, "GET", "/api/v1/status", conn=c, token=TOKEN)[0] == 200
    assert d.terminate() == 0


def local_address():
    """An address of this host that is not loopback, or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent
            a = s.getsockname()[0]
            return None if a.startswith("127.") else a
    except OSError:
        return None


def test_tls(daemons, tmpdir_):
    key, cert = os.path.join(tmpdir_, "key.pem"), os.path.join(tmpdir_, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=LONG)
    os.chmod(key, 0o600)
    port = free_port()
    d = daemons(extra=http_extra(port, token_file(tmpdir_), tls=(cert, key)))
    ctx = ssl.create_default_context(cafile=cert)
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=LONG, context=ctx)
    code, ctype, st = call(port, "GET", "/api/v1/status", conn=c)
    assert code == 200 and st["ok"]
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=LONG, context=ctx)
    assert call(port, "POST", "/api/v1/reset", conn=c, token=TOKEN)[0] == 200
    # plain HTTP to the TLS port gets no HTTP answer
    with pytest.raises((http.client.HTTPException, OSError)):
        call(port, "GET", "/healthz")
    assert d.terminate() == 0
    # a key others can read is refused at start
    os.chmod(key, 0o644)
    cfg = os.path.join(tmpdir_, "tls.yaml")
    ports = {k: free_port() for k in ("in", "out", "lossless", "ctl")}
    with open(cfg, "w") as f:
        f.write(td.config_text(ports, extra=http_extra(free_port(), tls=(cert, key))))
    r = subprocess.run([td.FAID, "-c", cfg], capture_output=True, text=True, timeout=LONG)
    assert r.returncode == 1 and "http.tls_key" in r.stderr, r.stderr[-2000:]


def test_control_md_routes_table_matches_the_served_document(rest):
    """docs/control.md's routes table is the route table: the document faid serves lists the
    same methods, paths, token rule and summaries."""
    code, _, doc = call(rest.http_port, "GET", "/api/v1/openapi.json")
    text = open(os.path.join(td.SRC, "docs", "control.md")).read()
    table = text.split("<!-- routes:begin", 1)[1].split("<!-- routes:end", 1)[0]
    rows = set()
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("GET", "PUT", "POST"):
            rows.add((cells[0], cells[1].strip("`"), cells[2], cells[3]))
    served = set()
    for path, item in doc["paths"].items():
        for m, op in item.items():
            token = "always" if op["security"] == [{"bearer": []}] else "beyond localhost"
            served.add((m.upper(), path, token, op["summary"]))
    assert rows == served, (rows ^ served)
    assert rest.terminate() == 0


def test_aggregates_as_json_lists_with_shape(daemons, tmpdir_):
    """With peaks on, GET /api/v1/aggregates holds the aggregates message's keys, its arrays as
    {dtype, shape, data} with data a list of prod(shape) numbers (the virtual powder plot
    decompressed) and the counts of the frames sent."""
    from test_daemon import Receiver
    from test_peaks import PEAKS, spot_frames
    port = free_port()
    d = daemons(npt=48, extra=PEAKS + http_extra(port, token_file(tmpdir_)))
    assert call(port, "GET", "/api/v1/aggregates")[2] == {"available": False}
    rx = Receiver(d)
    rx.settle()
    imgs, _ = spot_frames(6)
    tx = Sender(d)
    tx.start(series_id=4, nimages=len(imgs))
    for i, img in enumerate(imgs):
        tx.image(i, img, series_id=4)
    tx.end(series_id=4)
    rx.collect_until_end()
    hits = sum(1 for r in rx.of("result") if r["is_hit"])
    code, ctype, ag = call(port, "GET", "/api/v1/aggregates")
    assert code == 200 and ag["available"] and ag["frames"] == 6 and ag["hits"] == hits
    doc = call(port, "GET", "/api/v1/openapi.json")[2]
    check_schema(doc, "Aggregates", ag)
    for key in ("virtual_powder_plot", "num_peaks_histogram", "hit_rate_history"):
        a = ag[key]
        check_schema(doc, "Array", a)
        n = 1
        for x in a["shape"]:
            n *= x
        assert len(a["data"]) == n, key
    assert ag["virtual_powder_plot"]["shape"] == list(imgs[0].shape)
    assert sum(ag["virtual_powder_plot"]["data"]) <= ag["peaks"]
    assert sum(ag["num_peaks_histogram"]["data"]) == 6
    assert d.terminate() == 0


def test_writer_target_turns_the_writer_on(daemons, tmpdir_):
    """Without writer.directory the writer is off; a directory set over control (here the
    ZeroMQ `writer` command, the same as the REST route) turns it on for the next series, and
    "" turns it off again."""
    port = free_port()
    d = daemons(extra=http_extra(port, token_file(tmpdir_)))
    assert call(port, "GET", "/api/v1/writer")[2]["directory"] == ""
    out = os.path.join(tmpdir_, "scans")
    os.makedirs(out)
    r = d.request({"cmd": "writer", "directory": out, "prefix": "p-"})
    assert r["ok"] and r["directory"] == os.path.realpath(out), r
    tx = Sender(d)
    for sid, uid in ((1, "a"), (2, "b")):
        tx.start(series_id=sid, series_unique_id=uid)
        tx.image(0, frames(1)[0], series_id=sid)
        tx.end(series_id=sid)
        d.wait_counters(lambda c: c["series"] >= sid, "series %d" % sid)
        if sid == 1:
            # series a's file is closed by its end before the writer is turned off
            t_end = time.monotonic() + LONG
            while time.monotonic() < t_end and d.status()["writer"]["files_written"] < 1:
                time.sleep(0.05)
            assert d.request({"cmd": "writer", "directory": ""})["directory"] == ""
    assert d.status()["writer"]["state"] == "off"
    assert sorted(os.listdir(out)) == ["p-a.h5"]
    assert d.terminate() == 0
