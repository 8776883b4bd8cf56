// faid's live dashboard: one EventSource on /events (server-sent events, at most 10 per second,
// arrays of at most 2,000 points), drawn on canvases by hand; no library. faid-fan serves the same
// page: the script first asks healthz (faid and faid-fan both answer it, so the daemon's page
// makes no failing request); where the answer carries X-Faid-Role: fan-out it shows the
// fan-out's instances and their summed aggregates (api/v1/fan, asked once a second) instead.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const rateHist = []; // [time s, frames/s]
  const hitHist = []; // [time s, hit rate]
  let events = 0;

  function fmt(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(d) : v.toFixed(d);
  }

  function niceTicks(lo, hi, n) {
    const span = hi - lo || 1;
    const step0 = span / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let j = Math.ceil(lo / step); j * step <= hi + 1e-9 * span; j++) out.push(j * step);
    return out;
  }

  // Line plot of several series over x on a canvas; null values break the line.
  function plot(cv, x, series, xlabel) {
    const ctx = cv.getContext("2d"), W = cv.width, H = cv.height;
    const L = 64, R = 10, T = 10, B = 34;
    ctx.clearRect(0, 0, W, H);
    let xmin = Infinity, xmax = -Infinity, ymin = Infinity, ymax = -Infinity;
    x.forEach((v) => { if (v !== null) { xmin = Math.min(xmin, v); xmax = Math.max(xmax, v); } });
    series.forEach((s) => s.y.forEach((v) => { if (v !== null) { ymin = Math.min(ymin, v); ymax = Math.max(ymax, v); } }));
    if (!isFinite(xmin) || !isFinite(ymin)) return;
    if (ymax === ymin) { ymax += 1; ymin -= 1; }
    if (xmax === xmin) xmax += 1;
    const px = (v) => L + (v - xmin) / (xmax - xmin) * (W - L - R);
    const py = (v) => H - B - (v - ymin) / (ymax - ymin) * (H - T - B);
    ctx.strokeStyle = "#ccd"; ctx.fillStyle = "#556"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
    niceTicks(ymin, ymax, 5).forEach((v) => {
      ctx.beginPath(); ctx.moveTo(L, py(v)); ctx.lineTo(W - R, py(v)); ctx.stroke();
      ctx.textAlign = "right"; ctx.fillText(fmt(v, 2), L - 4, py(v) + 4);
    });
    niceTicks(xmin, xmax, 8).forEach((v) => {
      ctx.textAlign = "center"; ctx.fillText(fmt(v, 2), px(v), H - B + 14);
    });
    ctx.fillText(xlabel, (L + W - R) / 2, H - 4);
    series.forEach((s) => {
      ctx.strokeStyle = s.color; ctx.lineWidth = 1.5; ctx.beginPath();
      let pen = false;
      s.y.forEach((v, i) => {
        if (v === null || x[i] === null) { pen = false; return; }
        if (pen) ctx.lineTo(px(x[i]), py(v)); else ctx.moveTo(px(x[i]), py(v));
        pen = true;
      });
      ctx.stroke();
    });
  }

  // The cake as an image: one cell per value, grey scale between the 1st and 99th percentiles.
  function drawCake(cv, cake) {
    const vals = cake.v.filter((v) => v !== null).sort((a, b) => a - b);
    if (!vals.length) return;
    const lo = vals[Math.floor(0.01 * (vals.length - 1))], hi = vals[Math.floor(0.99 * (vals.length - 1))];
    const img = new ImageData(cake.cols, cake.rows);
    cake.v.forEach((v, i) => {
      const g = v === null ? 0 : Math.max(0, Math.min(255, 255 * (v - lo) / ((hi - lo) || 1)));
      img.data[4 * i] = g; img.data[4 * i + 1] = g; img.data[4 * i + 2] = v === null ? 80 : g; img.data[4 * i + 3] = 255;
    });
    const tmp = document.createElement("canvas");
    tmp.width = cake.cols; tmp.height = cake.rows;
    tmp.getContext("2d").putImageData(img, 0, 0);
    const ctx = cv.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, cv.width, cv.height);
    ctx.drawImage(tmp, 0, 0, cv.width, cv.height);
  }

  // The peaks of a hit on the detector (fast axis to the right, slow axis down), dot area by
  // intensity rank.
  function drawPeaks(cv, hit) {
    const ctx = cv.getContext("2d"), W = cv.width, H = cv.height;
    ctx.clearRect(0, 0, W, H);
    const rows = hit.rows || 1, cols = hit.cols || 1;
    const sc = Math.min(W / cols, H / rows), ox = (W - cols * sc) / 2, oy = (H - rows * sc) / 2;
    ctx.fillStyle = "#1f2a36"; ctx.fillRect(ox, oy, cols * sc, rows * sc);
    const vals = hit.intensity.filter((v) => v !== null).sort((a, b) => a - b);
    ctx.fillStyle = "#ffcc33";
    hit.x.forEach((x, i) => {
      if (x === null || hit.y[i] === null) return;
      const v = hit.intensity[i];
      const rank = v === null || !vals.length ? 0.5 : vals.indexOf(v) / Math.max(1, vals.length - 1);
      ctx.beginPath(); ctx.arc(ox + x * sc, oy + hit.y[i] * sc, 1.5 + 3 * rank, 0, 2 * Math.PI); ctx.fill();
    });
  }

  function row(tb, cells) {
    const tr = document.createElement("tr");
    cells.forEach((c) => { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); });
    tb.appendChild(tr);
  }

  function update(st) {
    $("health").textContent = st.health;
    $("health").className = st.health === "ok" ? "ok" : "bad";
    $("version").textContent = st.version;
    $("series").textContent = "series " + st.series_id + ": " + st.series_frames + " frames";
    const c = st.counters;
    $("fps").textContent = fmt(st.fps, 1);
    $("lat").textContent = fmt(st.latency_ms.p50, 2) + " / " + fmt(st.latency_ms.p99, 2) + " / " + fmt(st.latency_ms.max, 2) + " ms";
    $("queue").textContent = st.queue.frames + " / " + st.queue.capacity + " frames";
    $("counts").textContent = c.received + " / " + c.processed;
    $("bad").textContent = c.failed + " / " + c.dropped + " / " + c.bad_input;
    const now = performance.now() / 1000;
    rateHist.push([now, st.fps]);
    while (rateHist.length && rateHist[0][0] < now - 300) rateHist.shift();
    plot($("rate"), rateHist.map((p) => p[0] - now), [{ y: rateHist.map((p) => p[1]), color: "#2a7" }], "s (frames/s, last 5 min)");
    const dt = $("devices").tBodies[0];
    dt.textContent = "";
    st.devices.forEach((d) => row(dt, [d.index, d.name, d.processed, d.failed, d.in_flight, fmt(100 * d.busy, 0) + " %"]));
    const pt = $("problems").tBodies[0];
    pt.textContent = "";
    Object.entries(st.drops).forEach(([k, v]) => row(pt, ["drop " + k, v]));
    Object.entries(st.errors).forEach(([k, v]) => row(pt, ["error " + k, v]));
    st.devices.forEach((d) => row(pt, ["failed on device " + d.index, d.failed]));
    if (st.profile) {
      const p = st.profile;
      $("prof-info").textContent = "frame " + p.frame_id + " of series " + p.series_id + ", device " + p.device +
        ", setup " + p.setup_version + ", " + p.bins + " bins" + (p.per_point > 1 ? " (" + p.per_point + " per point)" : "") +
        ", latency " + fmt(p.latency_us / 1000, 2) + " ms";
      $("avg-label").textContent = "average of the last " + p.average_of + " shown";
      plot($("profile"), p.x, [{ y: p.average, color: "#e07b00" }, { y: p.I, color: "#1f77b4" }], p.unit);
    }
    $("cake-box").hidden = !st.cake;
    if (st.cake) {
      $("cake-info").textContent = st.cake.rows + " x " + st.cake.cols + " (azimuthal x radial, downsampled)";
      drawCake($("cake"), st.cake);
    }
    $("hits-box").hidden = !st.peaks;
    if (st.peaks) {
      const k = st.peaks;
      $("hits-info").textContent = "hit rate " + fmt(100 * k.hit_rate, 1) + " % over the last " + k.window +
        " frames; " + k.hits + " hits in " + k.frames + " frames, " + k.peaks + " peaks";
      hitHist.push([now, 100 * k.hit_rate]);
      while (hitHist.length && hitHist[0][0] < now - 300) hitHist.shift();
      plot($("hitrate"), hitHist.map((p) => p[0] - now), [{ y: hitHist.map((p) => p[1]), color: "#c33" }], "s (hit rate %, last 5 min)");
    }
    $("peaks-box").hidden = !st.hit;
    if (st.hit) {
      $("peaks-info").textContent = "frame " + st.hit.frame_id + " of series " + st.hit.series_id + ": " +
        st.hit.num_peaks + " peaks" + (st.hit.x.length < st.hit.num_peaks ? " (" + st.hit.x.length + " shown)" : "");
      drawPeaks($("peaks"), st.hit);
    }
    events++;
    const s = $("status");
    s.dataset.events = events;
    s.dataset.frame = st.profile ? st.profile.frame_id : "";
    s.textContent = "updates: " + events;
  }

  // The fan-out's view: its instances with their state and the instances' latest aggregates
  // summed (GET api/v1/fan, which faid-fan rebuilds twice a second).
  function updateFan(st) {
    $("conn").textContent = "live"; $("conn").className = "ok";
    const live = st.instances.filter((i) => i.state === "live").length;
    $("health").textContent = "fan-out"; $("health").className = live ? "ok" : "bad";
    $("series").textContent = live + " of " + st.instances.length + " instances live";
    $("fan-info").textContent = st.counters.received + " messages received, " + st.counters.routed +
      " images routed, " + st.counters.dropped + " dropped, " + st.counters.lost + " lost";
    const tb = $("fan-instances").tBodies[0];
    tb.textContent = "";
    st.instances.forEach((i) => row(tb, [i.name, i.state + (i.flagged ? " (flagged)" : ""), i.sent, i.lost]));
    const a = st.aggregates;
    const s = $("status");
    if (a) {
      $("fan-frames").textContent = a.frames + " (" + a.instances + " of " + st.aggregates_from + " instances reported)";
      $("fan-hits").textContent = a.hits + " / " + a.peaks;
      $("fan-hitrate").textContent = fmt(100 * a.hit_rate, 1) + " % over the last " + a.hit_rate_window_frames + " frames";
      $("fan-hist-box").hidden = false;
      const w = a.num_peaks_bin_width;
      $("fan-hist-info").textContent = "frames by peak count, bins of " + w;
      plot($("fan-hist"), a.num_peaks_histogram.map((_, k) => k * w), [{ y: a.num_peaks_histogram, color: "#c33" }], "peaks");
      $("fan-powder-box").hidden = !a.powder;
      if (a.powder) {
        $("fan-powder-info").textContent = a.powder_shape[0] + " x " + a.powder_shape[1] + " pixels, " +
          a.powder.total + " peaks (shown in " + a.powder.rows + " x " + a.powder.cols + " blocks)";
        drawCake($("fan-powder"), a.powder);
      }
      s.dataset.fanFrames = a.frames;
      s.dataset.fanHitRate = a.hit_rate;
    } else {
      $("fan-frames").textContent = st.aggregates_from ? "no aggregates yet" : "fan.aggregates_from not set";
      $("fan-hist-box").hidden = true;
      $("fan-powder-box").hidden = true;
    }
    events++;
    s.dataset.events = events;
    s.dataset.fanInstances = live;
    s.textContent = "updates: " + events;
  }

  function fanLoop() {
    fetch("api/v1/fan").then((r) => r.json()).then(updateFan, () => {
      $("conn").textContent = "disconnected (retrying)"; $("conn").className = "bad";
    }).finally(() => setTimeout(fanLoop, 1000));
  }

  function daemonEvents() {
    const es = new EventSource("events");
    es.onopen = () => { $("conn").textContent = "live"; $("conn").className = "ok"; };
    es.onerror = () => { $("conn").textContent = "disconnected (retrying)"; $("conn").className = "bad"; };
    es.onmessage = (ev) => update(JSON.parse(ev.data));
  }

  fetch("healthz", { cache: "no-store" }).then((r) => r.headers.get("X-Faid-Role"), () => null).then((role) => {
    if (role !== "fan-out") return daemonEvents();
    document.body.classList.add("fan");
    document.title = "faid-fan";
    $("fan-box").hidden = false;
    fanLoop();
  });
})();
