"""The live dashboard in a real browser: headless Chromium (Debian `chromium`) opens faid's page at
/ of http.endpoint, driven through the DevTools protocol (websocket-client). The page must load
without a script error or console error, request nothing but faid (every URL the browser asks for
is on http.endpoint), its profile plot must change as frames arrive, and with peak finding on it
shows the hit rate and the peaks of the latest hit; a screenshot is kept in
tests/out/dashboard.png. Chromium on two shared cores is slow: one page, a few frames."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from test_daemon import LONG, SRC, Sender, daemons, free_port, tmpdir_  # noqa: F401

websocket = pytest.importorskip("websocket")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """One page target of a headless Chromium over the DevTools protocol."""

    def __init__(self, ws_url):
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


@pytest.mark.skipif(CHROMIUM is None, reason="chromium missing (Debian chromium)")
def test_dashboard_in_headless_chromium(daemons):
    port = free_port()
    from test_peaks import PEAKS, spot_frames
    d = daemons(npt=48, extra=PEAKS + 'http:\n  endpoint: "127.0.0.1:%d"\n' % port)
    profile = tempfile.mkdtemp(prefix="faid-chromium-")
    proc = None
    dt = None
    try:
        proc, dport = start_chromium(profile)
        dt = DevTools(page_ws(dport))
        for domain in ("Runtime", "Log", "Network", "Page"):
            dt.call(domain + ".enable")
        base = "http://127.0.0.1:%d/" % port
        dt.call("Page.navigate", url=base)
        status = "document.getElementById('status') && +document.getElementById('status').dataset.events"
        dt.wait_eval(status, lambda v: v and v >= 1, "first dashboard update")
        sig = ("(() => { const c = document.getElementById('profile'); "
               "return c.toDataURL(); })()")
        blank = hashlib.sha1(dt.eval(sig).encode()).hexdigest()

        # Frames arrive: the plot shows a profile.
        tx = Sender(d)
        tx.start(series_id=5)
        imgs, _ = spot_frames(4)  # frames 0 and 2 have spots: hits
        for i, img in enumerate(imgs):
            tx.image(i, img, series_id=5)
        frame = "document.getElementById('status').dataset.frame"
        dt.wait_eval(frame, lambda v: v not in (None, ""), "a profile on the page")
        first = hashlib.sha1(dt.wait_eval(sig, lambda v: hashlib.sha1(v.encode()).hexdigest()
                                          != blank, "plot drawn").encode()).hexdigest()
        seen_frame = dt.eval(frame)
        # Different frames (ten times brighter, another series): the plot changes again.
        for i, img in enumerate(imgs):
            tx.image(100 + i, img * 10 + 7, series_id=6)
        dt.wait_eval(frame, lambda v: v != seen_frame and int(v) >= 100, "a new profile")
        second = hashlib.sha1(dt.wait_eval(sig, lambda v: hashlib.sha1(v.encode()).hexdigest()
                                           != first, "plot redrawn").encode()).hexdigest()
        assert len({blank, first, second}) == 3
        assert "live" == dt.eval("document.getElementById('conn').textContent")
        # Peak finding is on: the hit rate and the peaks of the latest hit are shown.
        dt.wait_eval("!document.getElementById('peaks-box').hidden && "
                     "!document.getElementById('hits-box').hidden", bool, "hit panels shown")
        assert "peaks" in dt.eval("document.getElementById('peaks-info').textContent")

        shot = dt.call("Page.captureScreenshot", format="png")["data"]
        out = os.path.join(SRC, "tests", "out")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "dashboard.png"), "wb") as f:
            f.write(base64.b64decode(shot))

        with dt.cv:
            events = list(dt.events)
        errors = [e for e in events if e["method"] == "Runtime.exceptionThrown"
                  or (e["method"] == "Runtime.consoleAPICalled"
                      and e["params"]["type"] in ("error", "assert"))
                  or (e["method"] == "Log.entryAdded"
                      and e["params"]["entry"]["level"] == "error")]
        assert not errors, errors
        urls = [e["params"]["request"]["url"] for e in events
                if e["method"] == "Network.requestWillBeSent"]
        assert base in urls and base + "events" in urls, urls
        outside = [u for u in urls if not u.startswith(base) and not u.startswith("data:")]
        assert not outside, "the page requested something beyond faid: %s" % outside
        failed = [e["params"] for e in events if e["method"] == "Network.loadingFailed"
                  and not e["params"].get("canceled")]
        assert not failed, failed
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
    assert d.terminate() == 0
