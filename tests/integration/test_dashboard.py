"""The live dashboard in a real browser: headless Chromium (Debian `chromium`) opens faid's page at
/ of http.endpoint, driven through the DevTools protocol (websocket-client). The page must load
without a script error or console error, request nothing but faid (every URL the browser asks for
is on http.endpoint), its profile plot must change as frames arrive, and with peak finding on it
shows the hit rate and the peaks of the latest hit; a screenshot is kept in
tests/out/dashboard.png. Chromium on two shared cores is slow: one page, a few frames."""

import hashlib

import pytest

from chromium_page import needs_chromium, open_page, page_faults, screenshot
from test_daemon import Sender, daemons, free_port, tmpdir_  # noqa: F401

pytest.importorskip("websocket")


@needs_chromium
def test_dashboard_in_headless_chromium(daemons):
    port = free_port()
    from test_peaks import PEAKS, spot_frames
    d = daemons(npt=48, extra=PEAKS + 'http:\n  endpoint: "127.0.0.1:%d"\n' % port)
    base = "http://127.0.0.1:%d/" % port
    with open_page(base) as dt:
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

        screenshot(dt, "dashboard.png")

        seen = page_faults(dt, base)
        assert not seen["errors"], seen["errors"]
        assert base in seen["urls"] and base + "events" in seen["urls"], seen["urls"]
        assert not seen["outside"], "the page requested something beyond faid: %s" % seen["outside"]
        assert not seen["failed"], seen["failed"]
    assert d.terminate() == 0
