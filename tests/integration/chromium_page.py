"""Headless Chromium (Debian `chromium`) driven over the DevTools protocol (websocket-client), for
the tests of faid's web page: test_dashboard.py (on faid) and test_fan.py (the same page on
faid-fan). open_page() starts a browser with a profile of its own, opens a URL with the Runtime,
Log, Network and Page events recorded, and leaves no browser process or profile behind;
page_faults() sorts what the page did that a page of faid must never do; screenshot() keeps the
page in tests/out."""

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from test_daemon import LONG, SRC

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium missing (Debian chromium)")


class DevTools:
    """One page target of a headless Chromium over the DevTools protocol."""

    def __init__(self, ws_url):
        websocket = pytest.importorskip("websocket")
        self.ws = websocket.create_connection(ws_url, timeout=LONG, suppress_origin=True)
        self.next_id = 0
        self.replies = {}
        self.events = []
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while True:
                msg = json.loads(self.ws.recv())
                with self.cv:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self.cv.notify_all()
        except Exception:  # connection closed
            pass

    def call(self, method, **params):
        with self.cv:
            self.next_id += 1
            i = self.next_id
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        with self.cv:
            if not self.cv.wait_for(lambda: i in self.replies, LONG):
                raise TimeoutError(method)
            r = self.replies.pop(i)
        assert "error" not in r, (method, r)
        return r["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def wait_eval(self, expr, pred, what, timeout=LONG):
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            v = self.eval(expr)
            if pred(v):
                return v
            time.sleep(0.2)
        raise TimeoutError("%s: last %r" % (what, v))

    def close(self):
        self.ws.close()


def start_chromium(profile_dir):
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio", "--window-size=1280,1000",
         "--remote-debugging-port=0", "--user-data-dir=" + profile_dir, "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile_dir, "DevToolsActivePort")
    t_end = time.monotonic() + LONG
    while time.monotonic() < t_end:
        assert proc.poll() is None, "chromium exited with %s" % proc.returncode
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if len(lines) >= 2:
                return proc, int(lines[0])
        time.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


def page_ws(port):
    import urllib.request
    t_end = time.monotonic() + LONG
    while time.monotonic() < t_end:
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
            for t in json.load(r):
                if t.get("type") == "page":
                    return t["webSocketDebuggerUrl"]
        time.sleep(0.2)
    raise TimeoutError("no page target")


@contextlib.contextmanager
def open_page(url):
    """A headless Chromium showing url, its DevTools page (events recorded from before the
    navigation); the browser is stopped and its profile removed however the block ends."""
    profile = tempfile.mkdtemp(prefix="faid-chromium-")
    proc = dt = None
    try:
        proc, dport = start_chromium(profile)
        dt = DevTools(page_ws(dport))
        for domain in ("Runtime", "Log", "Network", "Page"):
            dt.call(domain + ".enable")
        dt.call("Page.navigate", url=url)
        yield dt
    finally:
        if dt:
            dt.close()
        if proc:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(dt, name):
    """The page as tests/out/<name>."""
    shot = dt.call("Page.captureScreenshot", format="png")["data"]
    out = os.path.join(SRC, "tests", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name), "wb") as f:
        f.write(base64.b64decode(shot))


def page_faults(dt, base):
    """What the page did so far, sorted: script errors and console errors or assertions
    (`errors`), every URL it requested (`urls`), those beyond base (`outside`: a page of faid asks
    nothing but its server), and loads that failed other than by being cancelled (`failed`)."""
    with dt.cv:
        events = list(dt.events)
    errors = [e for e in events if e["method"] == "Runtime.exceptionThrown"
              or (e["method"] == "Runtime.consoleAPICalled"
                  and e["params"]["type"] in ("error", "assert"))
              or (e["method"] == "Log.entryAdded"
                  and e["params"]["entry"]["level"] == "error")]
    urls = [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]
    outside = [u for u in urls if not u.startswith(base) and not u.startswith("data:")]
    failed = [e["params"] for e in events if e["method"] == "Network.loadingFailed"
              and not e["params"].get("canceled")]
    return {"errors": errors, "urls": urls, "outside": outside, "failed": failed}
