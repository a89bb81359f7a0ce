// snapflow dashboard: one page over the JSON API of package actors/web.
// No dependency, no external request: the server inlines this file.
(function () {
  "use strict";

  // ---- token and API ------------------------------------------------------
  // The token comes once as ?token= (the server also checks it on this
  // page's own URL) and is kept for this tab; fetch sends it as a bearer
  // header, EventSource (which cannot send headers) as ?token=.
  const params = new URLSearchParams(location.search);
  let token = params.get("token") || "";
  try {
    if (token) sessionStorage.setItem("snapflow-token", token);
    else token = sessionStorage.getItem("snapflow-token") || "";
  } catch (e) { /* storage disabled: the URL's token is enough */ }

  const HISTORY = 100; // checkpoints fetched and charted
  const POLL_MS = 2000;   // checkpoints and timeline, when the event stream is down
  const SAMPLE_MS = 1000; // the job's counters
  const RATE_WINDOW_MS = 5000;

  async function api(path, opts) {
    opts = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
    if (token) headers.Authorization = "Bearer " + token;
    const res = await fetch(path, Object.assign({}, opts, { headers: headers, cache: "no-store" }));
    let body = null;
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) {
      const msg = body && body.error ? body.error : res.status + " " + res.statusText;
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  // ---- DOM helpers ----------------------------------------------------------
  const $ = (id) => document.getElementById(id);
  const SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  function sv(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === "style") Object.assign(e.style, v); // CSSOM: allowed by the page's CSP
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }

  // ---- formatting -----------------------------------------------------------
  function fmtDur(s) {
    if (s == null || isNaN(s)) return "–";
    if (s === 0) return "0";
    if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
    if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
    if (s < 60) return s.toFixed(2) + " s";
    const m = Math.floor(s / 60), r = Math.floor(s % 60);
    if (m < 60) return m + "m " + String(r).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
  }
  function fmtBytes(b) {
    if (b == null || isNaN(b)) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(b < 10 ? 2 : 1)) + " " + u[i];
  }
  function fmtCount(n) {
    if (n == null || isNaN(n)) return "–";
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
    return Math.round(n).toLocaleString("en-US");
  }
  const pad2 = (n) => String(n).padStart(2, "0");
  function fmtClock(t) {
    const d = t instanceof Date ? t : new Date(t);
    if (isNaN(d)) return "–";
    return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
  }
  function fmtAgo(s) { return s == null ? "–" : fmtDur(Math.max(0, s)).replace(/\.\d+ s$/, " s") + " ago"; }
  const time = (t) => (t ? new Date(t).getTime() : NaN);
  const isTime = (t) => t && !String(t).startsWith("0001-");

  // ---- state ----------------------------------------------------------------
  const state = {
    job: null,
    samples: [],       // recent job samples, oldest first, that rates are measured over
    rates: {},         // operator id -> {in, out, bp (0..1)}, taskRates: task id -> bp
    taskBp: {},
    taskRates: {},
    cps: new Map(),    // id -> checkpoint
    timeline: [],
    open: new Set(),   // expanded checkpoint rows
    fresh: new Set(),  // ids to flash once
    clockSkew: 0,      // server now - local now, ms
  };

  // ---- job, topology and stats ------------------------------------------------
  async function loadJob() {
    const job = await api("api/v1/job");
    const now = time(job.now);
    if (!isNaN(now)) state.clockSkew = now - Date.now();
    // Rates are measured over the last few seconds (at least about one):
    // records move in batches, so a shorter window would jitter.
    if (!isNaN(now)) {
      state.samples.push(job);
      while (state.samples.length > 2 && now - time(state.samples[1].now) >= RATE_WINDOW_MS) state.samples.shift();
      const base = state.samples[0];
      const dt = (now - time(base.now)) / 1000;
      if (dt >= 0.9) computeRates(base, job, dt);
    }
    state.job = job;
    renderJob();
    renderTopology();
    drawStrip();
  }

  function computeRates(prev, job, dt) {
    const before = new Map((prev.operators || []).map((o) => [o.id, o]));
    const rates = {};
    for (const o of job.operators || []) {
      const p = before.get(o.id);
      if (!p) continue;
      const par = Math.max(1, o.parallelism || 1);
      rates[o.id] = {
        in: Math.max(0, (o.records_in - p.records_in) / dt),
        out: Math.max(0, (o.records_out - p.records_out) / dt),
        bp: clamp01((o.backpressure_seconds - p.backpressure_seconds) / dt / par),
      };
    }
    const tb = new Map((prev.tasks || []).map((t) => [t.id, t]));
    const taskBp = {}, taskRates = {};
    for (const t of job.tasks || []) {
      const p = tb.get(t.id);
      if (!p) continue;
      taskBp[t.id] = clamp01((t.backpressure_seconds - p.backpressure_seconds) / dt);
      taskRates[t.id] = { in: Math.max(0, (t.records_in - p.records_in) / dt), out: Math.max(0, (t.records_out - p.records_out) / dt) };
    }
    state.rates = rates;
    state.taskBp = taskBp;
    state.taskRates = taskRates;
  }
  const clamp01 = (x) => (isNaN(x) ? 0 : Math.max(0, Math.min(1, x)));

  function renderJob() {
    const j = state.job;
    if (!j) return;
    $("job-name").textContent = j.name || "job";
    document.title = (j.name || "job") + " · snapflow";
    const st = $("job-state");
    st.textContent = j.state || "unknown";
    st.className = "badge " + (j.state || "");
    $("job-epoch").textContent = j.epoch != null ? j.epoch : "–";
    const started = time(j.started), now = time(j.now);
    $("job-uptime").textContent = isTime(j.started) && !isNaN(now) ? fmtDur((now - started) / 1000) : "–";
    // The newest of the job's sample and of the live updates.
    let last = j.last_checkpoint;
    const done = completed();
    const lc = done[done.length - 1];
    if (lc && (!last || lc.id > last.id)) {
      last = { id: lc.id, savepoint: lc.savepoint, age_seconds: (Date.now() + state.clockSkew - time(lc.ended)) / 1000 };
    }
    $("job-last").textContent = last ? "#" + last.id + (last.savepoint ? " (" + last.savepoint + ")" : "") + ", " + fmtAgo(last.age_seconds) : "none yet";
    const c = j.counts || {};
    setStat("st-completed", fmtCount(c.completed));
    setStat("st-aborted", fmtCount(c.aborted), c.aborted > 0);
    setStat("st-declined", fmtCount(c.declined), c.declined > 0);
    setStat("st-failures", fmtCount(c.task_failures), c.task_failures > 0);
    setStat("st-restores", fmtCount(c.restores));
    let rin = 0, rout = 0, have = false;
    const kinds = new Map((j.operators || []).map((o) => [o.id, o.kind]));
    for (const [id, r] of Object.entries(state.rates)) {
      have = true;
      if (kinds.get(id) === "source") rin += r.out; // what enters the job
      if (kinds.get(id) === "sink") rout += r.in; // what leaves it
    }
    setStat("st-rate-in", have ? fmtCount(rin) : "–");
    setStat("st-rate-out", have ? fmtCount(rout) : "–");
    setStat("st-last-duration", lc ? fmtDur(lc.duration_seconds) : "–");
    setStat("st-last-size", lc ? fmtBytes(lc.bytes) : "–");
    const running = j.state === "running" || j.state === "restoring" || j.state === "starting";
    $("trigger").disabled = !running || $("trigger").dataset.busy === "1";
    $("savepoint-open").disabled = !running;
  }
  function setStat(id, text, bad) {
    const e = $(id);
    e.textContent = text;
    e.classList.toggle("bad", !!bad);
  }

  // Operators are laid out in columns by their longest path from a source.
  function layout(ops, edges) {
    const ids = ops.map((o) => o.id);
    const inEdges = new Map(ids.map((id) => [id, []]));
    for (const e of edges) if (inEdges.has(e.to) && inEdges.has(e.from)) inEdges.get(e.to).push(e.from);
    const depth = new Map();
    const visiting = new Set();
    function d(id) {
      if (depth.has(id)) return depth.get(id);
      if (visiting.has(id)) return 0; // a cycle would be a bug upstream; do not loop
      visiting.add(id);
      let v = 0;
      for (const f of inEdges.get(id)) v = Math.max(v, d(f) + 1);
      visiting.delete(id);
      depth.set(id, v);
      return v;
    }
    ids.forEach(d);
    const cols = [];
    for (const id of ids) {
      const c = depth.get(id);
      (cols[c] = cols[c] || []).push(id);
    }
    return cols.map((c) => c || []);
  }

  function bpClass(r) { return r >= 0.5 ? "bp-hot" : r >= 0.1 ? "bp-warn" : "bp-ok"; }
  function bpColor(r) { return r >= 0.5 ? "#f85149" : r >= 0.1 ? "#d29922" : "#3fb950"; }

  function renderTopology() {
    const svg = $("topology");
    const j = state.job;
    const ops = (j && j.operators) || [];
    const edges = (j && j.edges) || [];
    clear(svg);
    if (!ops.length) return;
    // Boxes keep their natural size (text stays readable) and spread over
    // the panel; only a graph too large for it is scaled down.
    const cols = layout(ops, edges);
    const n = cols.length;
    const rows = Math.max(...cols.map((c) => c.length));
    const rect = svg.getBoundingClientRect();
    const SW = Math.max(320, Math.round(rect.width)), SH = Math.max(160, Math.round(rect.height));
    const H = 92, GY = 22, M = 8;
    const W = Math.max(112, Math.min(190, (SW - 2 * M - (n - 1) * 58) / n));
    const GX = n > 1 ? Math.max(58, Math.min(130, (SW - 2 * M - n * W) / (n - 1))) : 0;
    const width = Math.max(SW, n * W + (n - 1) * GX + 2 * M);
    const height = Math.max(SH, rows * H + (rows - 1) * GY + 2 * M);
    const left = (width - (n * W + (n - 1) * GX)) / 2;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    const pos = new Map();
    cols.forEach((col, ci) => {
      const top = (height - (col.length * H + (col.length - 1) * GY)) / 2;
      col.forEach((id, ri) => pos.set(id, { x: left + ci * (W + GX), y: top + ri * (H + GY) }));
    });
    const chars = Math.max(8, Math.floor((W - 44) / 7.6));
    svg.append(sv("defs", null, sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#6b7280" }))));
    const ge = sv("g");
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      const g = sv("g", { class: "edge" });
      g.append(sv("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }));
      if (e.partitioning) {
        const lx = mx, ly = (y1 + y2) / 2 - 5;
        g.append(sv("text", { x: lx, y: ly, "text-anchor": "middle", class: "halo", text: e.partitioning }));
        g.append(sv("text", { x: lx, y: ly, "text-anchor": "middle", text: e.partitioning }));
      }
      ge.append(g);
    }
    svg.append(ge);
    const tasksByOp = new Map();
    for (const t of (j.tasks || [])) {
      const k = t.operator;
      (tasksByOp.get(k) || tasksByOp.set(k, []).get(k)).push(t);
    }
    for (const o of ops) {
      const p = pos.get(o.id);
      const r = state.rates[o.id];
      const bp = r ? r.bp : 0;
      const tasks = tasksByOp.get(o.id) || tasksByOp.get(o.name) || [];
      const g = sv("g", { class: "op " + bpClass(bp), transform: `translate(${p.x},${p.y})`, "data-op": o.id });
      const tipLines = [o.name + " (" + o.kind + ", parallelism " + o.parallelism + (o.keyed ? ", keyed" : "") + ")",
        "records in " + fmtCount(o.records_in) + ", out " + fmtCount(o.records_out),
        "backpressure " + (bp * 100).toFixed(1) + "% of the time, " + fmtDur(o.backpressure_seconds) + " in total",
        "queued batches " + (o.queued_batches || 0)];
      for (const t of tasks) tipLines.push("  " + t.id + (t.node ? " @" + t.node : "") + ": bp " + ((state.taskBp[t.id] || 0) * 100).toFixed(0) + "%, queued " + (t.queued_batches || 0));
      g.append(sv("title", { text: tipLines.join("\n") }));
      g.append(sv("rect", { class: "box", width: W, height: H, rx: 7 }));
      g.append(sv("text", { class: "name", x: 10, y: 19, text: truncate(o.name, chars) }));
      g.append(sv("text", { class: "par", x: W - 10, y: 19, "text-anchor": "end", text: "×" + o.parallelism }));
      g.append(sv("text", { class: "sub", x: 10, y: 37, text: o.keyed ? "keyed state" : o.kind }));
      const rate = r ? fmtCount(o.kind === "source" ? r.out : r.in) + "/s" : "–/s";
      g.append(sv("text", { class: "rate", x: 10, y: 54, text: rate }));
      g.append(sv("text", { class: "sub", x: 10, y: 70, text: "bp " + (bp * 100).toFixed(0) + "% · q " + (o.queued_batches || 0) }));
      // one cell per task, coloured by its own backpressure
      const n = Math.max(1, tasks.length || o.parallelism || 1);
      const cw = Math.min(18, (W - 20 - (n - 1) * 2) / n);
      for (let i = 0; i < n; i++) {
        const t = tasks[i];
        const tb = t ? (state.taskBp[t.id] || 0) : 0;
        g.append(sv("rect", { class: "bp-task", x: 10 + i * (cw + 2), y: H - 14, width: Math.max(2, cw), height: 6, fill: bpColor(tb), opacity: r ? 0.35 + 0.65 * Math.max(tb, 0.15) : 0.25 }));
      }
      svg.append(g);
    }
    renderTasks(j, ops);
    const nodes = (j.nodes || []);
    const nb = $("nodes");
    clear(nb);
    nb.hidden = nodes.length === 0;
    for (const n of nodes) nb.append(el("span", { class: "node" + (n.state === "lost" ? " lost" : ""), text: n.id + " " + n.address + " · " + n.state }));
  }
  // One row per task: where backpressure and queues sit.
  function renderTasks(j, ops) {
    const tbody = document.querySelector("#tasks tbody");
    clear(tbody);
    const order = new Map(ops.map((o, i) => [o.id, i]));
    const tasks = [...(j.tasks || [])].sort((a, b) => (order.get(a.operator) - order.get(b.operator)) || a.subtask - b.subtask);
    const cluster = tasks.some((t) => t.node);
    $("tasks-node").hidden = !cluster;
    for (const t of tasks) {
      const r = state.taskRates[t.id];
      const bp = state.taskBp[t.id];
      tbody.append(el("tr", { "data-task": t.id },
        el("td", { class: "task", text: t.id }),
        cluster ? el("td", { class: "when", text: t.node || "" }) : null,
        el("td", { class: "num", text: r ? fmtCount(r.in) : "–" }),
        el("td", { class: "num", text: r ? fmtCount(r.out) : "–" }),
        el("td", { class: "num" }, bp == null ? "–" : (bp * 100).toFixed(0) + "%",
          el("span", { class: "bar", style: { width: Math.max(1, Math.round(36 * (bp || 0))) + "px", background: bpColor(bp || 0) } })),
        el("td", { class: "num", text: t.queued_batches || 0 })));
    }
  }
  const truncate = (s, n) => (s && s.length > n ? s.slice(0, n - 1) + "…" : s || "");

  // ---- checkpoints ------------------------------------------------------------
  function upsertCheckpoint(cp, flash) {
    const had = state.cps.get(cp.id);
    if (had && had.tasks && !cp.tasks) cp.tasks = had.tasks;
    state.cps.set(cp.id, cp);
    if (flash && !had) state.fresh.add(cp.id);
    if (state.cps.size > HISTORY * 2) {
      const ids = [...state.cps.keys()].sort((a, b) => a - b);
      for (const id of ids.slice(0, state.cps.size - HISTORY)) state.cps.delete(id);
    }
  }
  function sortedCps() { return [...state.cps.values()].sort((a, b) => b.id - a.id); }
  function completed() {
    return [...state.cps.values()].filter((c) => c.status === "completed" && isTime(c.ended)).sort((a, b) => time(a.ended) - time(b.ended));
  }

  async function loadCheckpoints() {
    const r = await api("api/v1/checkpoints?limit=" + HISTORY);
    const seen = new Set();
    for (const cp of r.checkpoints || []) { upsertCheckpoint(cp, state.cps.size > 0); seen.add(cp.id); }
    renderCheckpoints();
  }

  function renderCheckpoints() {
    const tbody = document.querySelector("#checkpoints tbody");
    const cps = sortedCps().slice(0, HISTORY);
    $("checkpoints-empty").hidden = cps.length > 0;
    clear(tbody);
    for (const cp of cps) {
      const open = state.open.has(cp.id);
      const cls = "cp" + (open ? " open" : "") + (state.fresh.has(cp.id) ? " fresh" : "");
      const label = cp.status === "completed" && cp.final ? "final" : "";
      const tr = el("tr", { class: cls, "data-id": cp.id, "data-status": cp.status, onclick: () => toggle(cp.id) },
        el("td", { class: "id", text: cp.id }),
        el("td", null, el("span", { class: "badge " + cp.status, text: cp.status.replace("_", " ") }),
          cp.savepoint ? el("span", { class: "badge savepoint", text: "savepoint " + cp.savepoint, style: { marginLeft: "6px" } }) : null,
          label ? el("span", { class: "tag", text: label }) : null,
          cp.in_flight_bytes > 0 ? el("span", { class: "tag", title: "unaligned: records in flight stored with the checkpoint", text: "unaligned, " + fmtBytes(cp.in_flight_bytes) + " in flight" }) : null),
        el("td", { class: "when", text: fmtClock(cp.triggered) }),
        el("td", { class: "num", text: cp.status === "in_progress" ? "…" : fmtDur(cp.duration_seconds) }),
        el("td", { class: "num", text: cp.status === "completed" ? fmtBytes(cp.bytes) : "–" }),
        el("td", { class: "num", text: cp.status === "completed" ? fmtDur(cp.alignment_seconds) : "–" }),
        el("td", { class: "num", text: cp.status === "completed" ? fmtDur(cp.upload_seconds) : "–" }),
        el("td", null, cp.error ? el("span", { class: "err", title: cp.error, text: "!" }) : null, el("span", { class: "chev", text: "›" })));
      tbody.append(tr);
      if (open) tbody.append(detailRow(cp));
    }
    state.fresh.clear();
  }

  function detailRow(cp) {
    const td = el("td", { colspan: 8 });
    const tasks = cp.tasks || [];
    if (!tasks.length) {
      td.append(cp.error
        ? el("div", { class: "cp-error" }, el("b", { text: cp.status + (cp.task ? " by " + cp.task : "") + ": " }), cp.error)
        : el("span", { class: "empty", text: cp.status === "completed" ? "No per-task figures." : "Per-task figures come with completion." }));
      return el("tr", { class: "detail", "data-detail": cp.id }, td);
    }
    const max = { bytes: 1, alignment_seconds: 1e-9, sync_seconds: 1e-9, async_seconds: 1e-9 };
    let slowest = null, worst = -1;
    for (const t of tasks) {
      for (const k of Object.keys(max)) max[k] = Math.max(max[k], t[k] || 0);
      const total = (t.alignment_seconds || 0) + (t.sync_seconds || 0) + (t.async_seconds || 0);
      if (total > worst) { worst = total; slowest = t.task; }
    }
    const bar = (v, m, cls) => el("span", { class: "bar " + cls, style: { width: Math.max(1, Math.round(32 * (v || 0) / m)) + "px" } });
    const table = el("table", { class: "tasks" },
      el("thead", null, el("tr", null, el("th", { text: "task" }), el("th", { class: "num", text: "state", title: "the task's state snapshot" }),
        el("th", { class: "num", text: "alignment", title: "from the first barrier to the last" }),
        el("th", { class: "num", text: "sync", title: "the synchronous snapshot: records wait" }),
        el("th", { class: "num", text: "async", title: "the upload, while records flow" }))));
    const body = el("tbody");
    for (const t of tasks) {
      body.append(el("tr", { "data-task": t.task },
        el("td", { class: "task" }, t.task, tasks.length > 1 && t.task === slowest && worst > 0 ? el("span", { class: "tag", text: "slowest" }) : null),
        el("td", { class: "num" }, fmtBytes(t.bytes), bar(t.bytes, max.bytes, "bytes")),
        el("td", { class: "num" }, fmtDur(t.alignment_seconds), bar(t.alignment_seconds, max.alignment_seconds, "align")),
        el("td", { class: "num" }, fmtDur(t.sync_seconds), bar(t.sync_seconds, max.sync_seconds, "sync")),
        el("td", { class: "num" }, fmtDur(t.async_seconds), bar(t.async_seconds, max.async_seconds, "async"))));
    }
    table.append(body);
    td.append(table);
    return el("tr", { class: "detail", "data-detail": cp.id }, td);
  }

  async function toggle(id) {
    if (state.open.has(id)) state.open.delete(id);
    else {
      state.open.add(id);
      const cp = state.cps.get(id);
      if (cp && cp.status === "completed" && !cp.tasks) {
        try { upsertCheckpoint(await api("api/v1/checkpoints/" + id)); } catch (e) { toast(e.message, "bad"); }
      }
    }
    renderCheckpoints();
  }

  // ---- charts -----------------------------------------------------------------
  function niceTicks(max, n) {
    if (!(max > 0)) return [0];
    const raw = max / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = 0; v <= max + step * 1e-9; v += step) out.push(v);
    if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
    return out;
  }

  // Times on whole steps (1 s, 2 s, 5 s, ... 1 h) with at most n labels.
  function timeTicks(t0, t1, n) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);
    const step = steps.find((s) => (t1 - t0) / s <= n) || steps[steps.length - 1];
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return out;
  }

  const charts = [
    { id: "chart-duration", fmt: fmtDur, series: [["duration_seconds", ""], ["upload_seconds", "upload"]], fails: true },
    { id: "chart-size", fmt: fmtBytes, series: [["bytes", ""]] },
    { id: "chart-alignment", fmt: fmtDur, series: [["alignment_seconds", ""]] },
  ];

  function renderCharts() {
    const pts = completed();
    const failed = [...state.cps.values()].filter((c) => (c.status === "aborted" || c.status === "declined") && isTime(c.ended));
    let t0 = pts.length ? time(pts[0].ended) : NaN, t1 = pts.length ? time(pts[pts.length - 1].ended) : NaN;
    for (const f of failed) { const t = time(f.ended); if (!(t >= t0)) t0 = t; if (!(t <= t1)) t1 = t; }
    if (t1 - t0 < 1000) { t0 = (isNaN(t1) ? Date.now() : t1) - 1000; t1 = t0 + 1000; }
    $("chart-span").textContent = pts.length ? pts.length + " completed, " + fmtClock(t0) + " – " + fmtClock(t1) : "";
    for (const c of charts) drawChart(c, pts, failed, t0, t1);
  }

  function drawChart(c, pts, failed, t0, t1) {
    const svg = $(c.id);
    clear(svg);
    const box = svg.getBoundingClientRect();
    const W = Math.max(200, Math.round(box.width)), H = Math.max(50, Math.round(box.height));
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const L = 62, R = 10, T = 6, B = 16;
    const key = c.series[0][0];
    let max = 0;
    for (const p of pts) for (const [k] of c.series) max = Math.max(max, p[k] || 0);
    const ticks = niceTicks(max || (key === "bytes" ? 1024 : 0.001), 3);
    const top = ticks[ticks.length - 1] || 1;
    const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
    const y = (v) => T + (H - T - B) * (1 - v / top);
    const grid = sv("g", { class: "grid" }), axis = sv("g", { class: "axis" });
    for (const v of ticks) {
      grid.append(sv("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      axis.append(sv("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end", text: c.fmt(v) }));
    }
    // Labels are centred on their time; one too close to an edge to fit is
    // left out, unless it is the only one.
    const times = timeTicks(t0, t1, Math.max(2, Math.floor((W - L - R) / 80)));
    const fit = times.filter((t) => x(t) >= L + 26 && x(t) <= W - R - 26);
    for (const t of fit.length ? fit : times.slice(0, 1)) {
      axis.append(sv("text", { x: Math.min(Math.max(x(t), L + 26), W - R - 26), y: H - 3, "text-anchor": "middle", text: fmtClock(t) }));
    }
    svg.append(grid, axis);
    if (pts.length) {
      c.series.forEach(([k, cls], si) => {
        const d = pts.map((p, i) => (i ? "L" : "M") + x(time(p.ended)).toFixed(1) + "," + y(p[k] || 0).toFixed(1)).join("");
        if (si === 0 && pts.length > 1) {
          svg.append(sv("path", { class: "area", d: d + "L" + x(time(pts[pts.length - 1].ended)).toFixed(1) + "," + y(0) + "L" + x(time(pts[0].ended)).toFixed(1) + "," + y(0) + "Z" }));
        }
        svg.append(sv("path", { class: "line" + (cls ? " " + cls : ""), d: d, "data-points": pts.length }));
      });
      if (pts.length <= 60) {
        for (const p of pts) svg.append(sv("circle", { class: "pt" + (p.savepoint ? " savepoint" : ""), cx: x(time(p.ended)), cy: y(p[key] || 0), r: 2.6 }));
      }
    }
    if (c.fails) {
      for (const f of failed) {
        const fx = x(time(f.ended));
        svg.append(sv("path", { class: "failmark", d: `M${fx - 3},${T} l6,6 m0,-6 l-6,6` }, sv("title", { text: "#" + f.id + " " + f.status + ": " + (f.error || "") })));
      }
    }
    const cross = sv("line", { class: "cross", y1: T, y2: H - B, visibility: "hidden" });
    svg.append(cross);
    svg.onmousemove = (ev) => {
      if (!pts.length) return;
      const r = svg.getBoundingClientRect();
      const mx = (ev.clientX - r.left) * W / r.width;
      let best = pts[0], bd = Infinity;
      for (const p of pts) { const dd = Math.abs(x(time(p.ended)) - mx); if (dd < bd) { bd = dd; best = p; } }
      const bx = x(time(best.ended));
      cross.setAttribute("x1", bx); cross.setAttribute("x2", bx); cross.setAttribute("visibility", "visible");
      const lines = ["#" + best.id + (best.savepoint ? " savepoint " + best.savepoint : "") + "  " + fmtClock(best.ended)];
      for (const [k, label] of c.series) lines.push((label || k.replace(/_seconds$/, "").replace("bytes", "size")) + " " + c.fmt(best[k]));
      showTip(lines, ev);
    };
    svg.onmouseleave = () => { cross.setAttribute("visibility", "hidden"); $("tip").hidden = true; };
  }

  function showTip(lines, ev) {
    const tip = $("tip"), panel = $("charts-panel").getBoundingClientRect();
    clear(tip);
    lines.forEach((l, i) => { if (i) tip.append(el("br")); tip.append(l); });
    tip.hidden = false;
    let left = ev.clientX - panel.left + 14;
    if (left + tip.offsetWidth > panel.width - 6) left = ev.clientX - panel.left - tip.offsetWidth - 14;
    tip.style.left = left + "px";
    tip.style.top = Math.max(4, ev.clientY - panel.top - 10) + "px";
  }

  // ---- timeline ---------------------------------------------------------------
  async function loadTimeline() {
    const r = await api("api/v1/timeline?limit=" + HISTORY);
    state.timeline = r.timeline || [];
    renderTimeline();
  }
  function addTimeline(e) {
    state.timeline.unshift(e);
    if (state.timeline.length > HISTORY) state.timeline.length = HISTORY;
    renderTimeline();
  }

  function describe(e) {
    switch (e.kind) {
      case "task-failed": return [e.task || "a task", e.cause ? "cause " + e.cause : ""];
      case "restoring": return ["epoch " + e.epoch, e.savepoint ? "from savepoint " + e.savepoint : e.checkpoint ? "from checkpoint #" + e.checkpoint : "from the start"];
      case "running": return ["epoch " + e.epoch, e.savepoint ? "restored savepoint " + e.savepoint : e.checkpoint ? "restored #" + e.checkpoint : "fresh state"];
      case "node-joined": case "node-lost": return [e.node || "a node", ""];
      default: return ["epoch " + e.epoch, ""];
    }
  }

  function renderTimeline() {
    const list = $("timeline");
    clear(list);
    $("timeline-empty").hidden = state.timeline.length > 0;
    for (const e of state.timeline) {
      const [what, detail] = describe(e);
      list.append(el("li", { "data-kind": e.kind },
        el("span", { class: "when", text: fmtClock(e.time) }),
        el("span", { class: "k k-" + e.kind, text: e.kind.replace("-", " ") }),
        el("span", { class: "what", title: e.error || "" }, what,
          detail ? el("span", { class: "detail", text: detail }) : null,
          e.error ? el("span", { class: "err", text: e.error }) : null)));
    }
    drawStrip();
  }

  function drawStrip() {
    const svg = $("timeline-strip");
    clear(svg);
    const j = state.job;
    const box = svg.getBoundingClientRect();
    const W = Math.max(200, Math.round(box.width)), H = 44, L = 8, R = 8, Y = 18;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const now = j && !isNaN(time(j.now)) ? time(j.now) : Date.now() + state.clockSkew;
    let t0 = j && isTime(j.started) ? time(j.started) : now - 60000;
    for (const e of state.timeline) if (time(e.time) < t0) t0 = time(e.time);
    const t1 = Math.max(now, t0 + 1000);
    const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
    svg.append(sv("line", { class: "track", x1: L, x2: W - R, y1: Y, y2: Y }));
    for (const c of completed()) svg.append(sv("line", { class: "tick", x1: x(time(c.ended)), x2: x(time(c.ended)), y1: Y - 4, y2: Y + 4 }));
    for (const e of state.timeline) {
      const ex = x(time(e.time));
      const g = sv("g", { transform: `translate(${ex.toFixed(1)},${Y})` }, sv("title", { text: fmtClock(e.time) + " " + e.kind + " " + describe(e).join(" ") + (e.error ? ": " + e.error : "") }));
      g.append(e.kind === "task-failed" || e.kind === "failed" || e.kind === "node-lost"
        ? sv("path", { class: "mk-" + e.kind, d: "M0,-6 L6,0 L0,6 L-6,0 Z" })
        : sv("circle", { class: "mk-" + e.kind, r: 4.5 }));
      svg.append(g);
    }
    const ax = sv("g", { class: "axis" });
    ax.append(sv("text", { x: L, y: H - 4, text: fmtClock(t0) }));
    ax.append(sv("text", { x: W - R, y: H - 4, "text-anchor": "end", text: "now " + fmtClock(t1) }));
    svg.append(ax);
  }

  // ---- actions ----------------------------------------------------------------
  const trigger = $("trigger");
  trigger.addEventListener("click", async () => {
    trigger.dataset.busy = "1";
    trigger.disabled = true;
    trigger.textContent = "Checkpointing…";
    try {
      const r = await api("api/v1/checkpoints", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      trigger.dataset.lastId = r.id;
      await refreshCheckpoint(r.id);
      toast("Checkpoint #" + r.id + " completed", "ok");
    } catch (e) {
      toast("Checkpoint failed: " + e.message, "bad");
    } finally {
      trigger.dataset.busy = "";
      trigger.textContent = "Trigger checkpoint";
      renderJob();
    }
  });

  async function refreshCheckpoint(id) {
    try {
      upsertCheckpoint(await api("api/v1/checkpoints/" + id), true);
    } catch (e) { /* the event stream or the next poll brings it */ }
    renderCheckpoints();
    renderCharts();
  }

  const form = $("savepoint-form");
  $("savepoint-open").addEventListener("click", () => {
    form.hidden = !form.hidden;
    if (!form.hidden) {
      const d = new Date();
      $("savepoint-name").value = "sp-" + d.getFullYear() + pad2(d.getMonth() + 1) + pad2(d.getDate()) + "-" + pad2(d.getHours()) + pad2(d.getMinutes()) + pad2(d.getSeconds());
      $("savepoint-name").select();
    }
  });
  $("savepoint-cancel").addEventListener("click", () => { form.hidden = true; });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const name = $("savepoint-name").value.trim(), stop = $("savepoint-stop").checked;
    if (stop && !confirm("Stop the job once savepoint " + name + " is taken?")) return;
    const take = $("savepoint-take");
    take.disabled = true;
    try {
      const r = await api("api/v1/savepoints", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: name, stop: stop }) });
      form.hidden = true;
      await refreshCheckpoint(r.id);
      toast("Savepoint " + r.name + " (#" + r.id + ") taken" + (r.stopped ? "; the job stopped" : ""), "ok");
    } catch (e) {
      toast("Savepoint failed: " + e.message, "bad");
    } finally {
      take.disabled = false;
    }
  });

  function toast(msg, kind) {
    const t = el("div", { class: "toast " + (kind || ""), role: "status", text: msg });
    $("toasts").append(t);
    setTimeout(() => t.remove(), kind === "bad" ? 9000 : 4500);
    while ($("toasts").children.length > 4) $("toasts").firstChild.remove();
  }

  // ---- live updates -------------------------------------------------------------
  const live = $("live");
  function setLive(mode, text) { live.className = "live " + mode; live.textContent = text; }

  let pollTimer = null, sse = null, sseFailures = 0;
  let jobSoon = null;
  function refreshJobSoon() {
    if (jobSoon) return;
    jobSoon = setTimeout(() => { jobSoon = null; loadJob().catch(() => {}); }, 250);
  }
  function onUpdate(u) {
    if (state.job && u.state) { state.job.state = u.state; state.job.epoch = u.epoch; }
    if (u.kind === "checkpoint" && u.checkpoint) {
      upsertCheckpoint(u.checkpoint, true);
      renderCheckpoints();
      renderCharts();
      renderJob();
      if (u.checkpoint.status !== "in_progress") refreshJobSoon();
    } else if (u.kind === "timeline" && u.timeline) {
      addTimeline(u.timeline);
      renderJob();
      refreshJobSoon();
    } else if (u.kind === "job") {
      renderJob();
      refreshJobSoon();
    }
  }

  function connect() {
    if (!window.EventSource) { startPolling(); return; }
    sse = new EventSource("api/v1/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
    sse.onopen = () => {
      sseFailures = 0;
      setLive("on", "live");
      stopPolling();
      // what happened while we were away
      loadCheckpoints().then(renderCharts).catch(() => {});
      loadTimeline().catch(() => {});
    };
    sse.onmessage = (ev) => {
      try { onUpdate(JSON.parse(ev.data)); } catch (e) { /* a malformed update: the next poll repairs */ }
    };
    sse.onerror = () => {
      sseFailures++;
      if (sse.readyState === EventSource.CLOSED || sseFailures >= 3) {
        sse.close();
        sse = null;
        startPolling();
        setTimeout(connect, 15000); // try the stream again later
      } else {
        setLive("off", "reconnecting");
      }
    };
  }
  function startPolling() {
    setLive("poll", "polling");
    if (pollTimer) return;
    pollTimer = setInterval(() => {
      loadCheckpoints().then(renderCharts).catch(() => {});
      loadTimeline().catch(() => {});
    }, POLL_MS);
  }
  function stopPolling() { if (pollTimer) { clearInterval(pollTimer); pollTimer = null; } }

  // The job's counters move without events: sample them steadily.
  function sampleJob() {
    loadJob().then(() => { if (state.job.state === "failed" || state.job.state === "finished") setLive("off", state.job.state); })
      .catch((e) => setLive("off", e.status === 401 ? "unauthorized" : "offline"));
  }

  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { renderTopology(); renderCharts(); drawStrip(); }, 100);
  });

  async function start() {
    try {
      await loadJob();
      await Promise.all([loadCheckpoints(), loadTimeline()]);
      renderJob();
      renderCharts();
    } catch (e) {
      toast("Cannot load the job: " + e.message, "bad");
      setLive("off", e.status === 401 ? "unauthorized" : "offline");
    }
    connect();
    setInterval(sampleJob, SAMPLE_MS);
  }
  start();
})();
