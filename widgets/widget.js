// pylog widgets: one anywidget ESM for the lag view, the partition view, the topic browser, the
// cluster view, the client metrics view and the live table.
// Plain DOM and inline SVG, no dependencies. The model's "kind" picks the view; every view is
// redrawn from the synced state on change. Numbers carry data-* attributes so tests can read them.

const SVG = "http://www.w3.org/2000/svg";
const STATUS_CLASS = { OK: "ok", WARN: "warn", ERR: "err", STOP: "err", STALL: "err" };
const LINE_COLORS = ["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#ec4899", "#14b8a6", "#64748b"];

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "onclick") el.addEventListener("click", v);
    else if (k === "onchange") el.addEventListener("change", v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function fmt(n) {
  if (n === null || n === undefined) return "–";
  return Number(n).toLocaleString("en-US");
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "–";
  return new Date(Number(ms)).toISOString().replace("T", " ").replace("Z", "");
}

function badge(status) {
  if (!status) return h("span", { class: "pl-badge pl-none", "data-status": "" }, "–");
  return h("span", { class: "pl-badge pl-" + (STATUS_CLASS[status] || "none"), "data-status": status }, status);
}

function table(cls, columns, rows) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "pl-num" : null }, c.label)));
  const body = rows.map((r) => h("tr", r.attrs || {}, columns.map((c) =>
    h("td", { class: c.num ? "pl-num" : null, "data-col": c.key, "data-value": r.values[c.key] ?? "" },
      c.render ? c.render(r.values[c.key], r.values) : r.values[c.key] ?? "–"))));
  return h("table", { class: "pl-table " + cls }, h("thead", {}, head), h("tbody", {}, body));
}

// A line chart of [[t_ms, value], ...] series: time on x, value on y, zero at the bottom.
function lineChart(series, { width = 520, height = 140 } = {}) {
  const pad = { l: 56, r: 10, t: 10, b: 22 };
  const svg = s("svg", { class: "pl-chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const points = series.flatMap((x) => x.points);
  if (points.length === 0) {
    svg.append(s("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "pl-muted" }, "no samples yet"));
    return svg;
  }
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]));
  const vmax = Math.max(1, ...points.map((p) => p[1]));
  const x = (t) => pad.l + (t1 === t0 ? (width - pad.l - pad.r) : ((t - t0) / (t1 - t0)) * (width - pad.l - pad.r));
  const y = (v) => height - pad.b - (v / vmax) * (height - pad.t - pad.b);
  svg.append(s("line", { x1: pad.l, y1: y(0), x2: width - pad.r, y2: y(0), class: "pl-axis" }));
  svg.append(s("line", { x1: pad.l, y1: pad.t, x2: pad.l, y2: y(0), class: "pl-axis" }));
  svg.append(s("text", { x: pad.l - 4, y: y(vmax) + 4, "text-anchor": "end", class: "pl-tick" }, fmt(vmax)));
  svg.append(s("text", { x: pad.l - 4, y: y(0), "text-anchor": "end", class: "pl-tick" }, "0"));
  const span = (t1 - t0) / 1000;
  const spanText = span < 10 ? span.toFixed(1) + "s" : span < 600 ? Math.round(span) + "s" : Math.round(span / 60) + " min";
  svg.append(s("text", { x: width - pad.r, y: height - 6, "text-anchor": "end", class: "pl-tick" }, `last ${spanText}`));
  series.forEach((ser, i) => {
    const color = LINE_COLORS[i % LINE_COLORS.length];
    const pts = ser.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    const line = s("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2, "data-series": ser.name });
    line.append(s("title", {}, ser.name));
    svg.append(line);
    const last = ser.points[ser.points.length - 1];
    svg.append(s("circle", { cx: x(last[0]), cy: y(last[1]), r: 3, fill: color }));
  });
  return svg;
}

// Horizontal bars, one per item: [{label, value, text}].
function barChart(items, { width = 520, barHeight = 18 } = {}) {
  const pad = { l: 40, r: 90 };
  const height = Math.max(barHeight + 8, items.length * (barHeight + 6) + 6);
  const svg = s("svg", { class: "pl-chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const vmax = Math.max(1, ...items.map((it) => it.value || 0));
  items.forEach((it, i) => {
    const y = 4 + i * (barHeight + 6);
    const w = ((it.value || 0) / vmax) * (width - pad.l - pad.r);
    svg.append(s("text", { x: pad.l - 6, y: y + barHeight - 5, "text-anchor": "end", class: "pl-tick" }, it.label));
    const bar = s("rect", { x: pad.l, y, width: Math.max(w, it.value ? 1 : 0), height: barHeight, class: "pl-bar",
      "data-label": it.label, "data-value": it.value ?? "" });
    bar.append(s("title", {}, `${it.label}: ${it.text}`));
    svg.append(bar);
    svg.append(s("text", { x: pad.l + w + 6, y: y + barHeight - 5, class: "pl-tick" }, it.text));
  });
  return svg;
}

function header(title, model, extra) {
  const bar = h("div", { class: "pl-header" }, h("span", { class: "pl-title" }, title));
  if (extra) bar.append(extra);
  const err = model.get("error");
  const wrap = h("div", {}, bar);
  if (err) wrap.append(h("div", { class: "pl-error", "data-field": "error" }, err));
  return wrap;
}

function renderLag(model, el) {
  const snap = model.get("snapshot") || { groups: [] };
  const history = model.get("history") || {};
  const running = model.get("running");
  const toggle = h("button", { class: "pl-button", "data-action": "toggle", onclick: () => {
    model.set("running", !model.get("running"));
    model.save_changes();
  } }, running ? "Pause" : "Resume");
  const refresh = h("button", { class: "pl-button", "data-action": "refresh",
    onclick: () => model.send({ type: "refresh" }) }, "Refresh");
  const info = h("span", { class: "pl-muted" },
    (running ? `live, every ${model.get("interval_s")}s` : "paused") + ` · updated ${fmtTime(snap.updated_ms)}`);
  el.append(header("Consumer lag", model, h("span", {}, info, toggle, refresh)));
  const groups = snap.groups || [];
  if (groups.length === 0) {
    el.append(h("div", { class: "pl-muted", "data-field": "empty" }, "no consumer groups"));
    return;
  }
  const series = groups.map((g) => ({ name: g.group, points: history[g.group] || [] }));
  el.append(h("div", { class: "pl-chart-box" }, lineChart(series),
    h("div", { class: "pl-legend" }, series.map((ser, i) => h("span", {},
      h("i", { style: `background:${LINE_COLORS[i % LINE_COLORS.length]}` }), ser.name)))));
  for (const g of groups) {
    const members = (g.members || []).map((m) => `${m.client_id || m.member_id} @ ${m.host || "?"} (${m.partitions})`);
    const box = h("div", { class: "pl-group", "data-group": g.group },
      h("div", { class: "pl-group-head" },
        h("b", {}, g.group), " ", badge(g.status),
        h("span", { class: "pl-kv" }, "type ", h("b", { "data-field": "group-type" }, g.group_type || "classic")),
        h("span", { class: "pl-kv" }, "state ", h("b", { "data-field": "state" }, g.state || "–")),
        h("span", { class: "pl-kv" }, "members ", h("b", { "data-field": "members" }, (g.members || []).length)),
        h("span", { class: "pl-kv" }, "coordinator ", h("b", { "data-field": "coordinator" }, g.coordinator || "–")),
        h("span", { class: "pl-kv" }, "total lag ", h("b", { "data-field": "total-lag", "data-value": g.total_lag }, fmt(g.total_lag))),
        h("span", { class: "pl-kv" }, "max lag ", h("b", { "data-field": "max-lag", "data-value": g.max_lag }, fmt(g.max_lag))),
        g.group_type === "share" ? h("span", { class: "pl-kv" }, "in flight ",
          h("b", { "data-field": "in-flight", "data-value": g.in_flight }, fmt(g.in_flight))) : null,
        g.group_type === "share" ? h("span", { class: "pl-kv" }, "acquired ",
          h("b", { "data-field": "acquired", "data-value": g.acquired }, fmt(g.acquired))) : null),
      members.length ? h("div", { class: "pl-muted pl-members" }, "members: " + members.join(", ")) : null,
      table("pl-lag-partitions", [
        { key: "topic", label: "topic" },
        { key: "partition", label: "partition", num: true },
        { key: "committed", label: g.group_type === "share" ? "start offset" : "committed", num: true, render: fmt },
        { key: "log_end", label: "log end", num: true, render: fmt },
        { key: "lag", label: "lag", num: true, render: fmt },
        ...(g.group_type === "share" ? [
          { key: "in_flight", label: "in flight", num: true, render: fmt },
          { key: "acquired", label: "acquired", num: true, render: fmt },
        ] : []),
        { key: "status", label: "status", render: (v) => badge(v) },
        { key: "owner", label: "owner (client / host)" },
      ], (g.partitions || []).map((p) => ({
        attrs: { "data-topic": p.topic, "data-partition": p.partition },
        values: { ...p, owner: p.member_id ? `${p.client_id || p.member_id} / ${p.host || "?"}` : "–" },
      }))));
    el.append(box);
  }
}

function renderPartitions(model, el) {
  const snap = model.get("snapshot") || { partitions: [], notes: [] };
  const metric = model.get("metric") || "records";
  const pick = h("select", { class: "pl-select", "data-action": "metric", onchange: (e) => {
    model.set("metric", e.target.value);
    model.save_changes();
  } }, ["records", "bytes"].map((m) => h("option", { value: m, selected: m === metric ? "selected" : null }, m)));
  el.append(header(`Partitions of ${snap.topic || "?"}`, model, h("span", {}, "chart: ", pick)));
  const rows = snap.partitions || [];
  const text = metric === "bytes" ? fmtBytes : fmt;
  el.append(h("div", { class: "pl-chart-box" }, barChart(rows.map((r) => ({
    label: `p${r.partition}`, value: r[metric], text: text(r[metric]) })))));
  const list = (v) => (v === null || v === undefined ? "–" : v.join(", "));
  el.append(table("pl-partitions", [
    { key: "partition", label: "partition", num: true },
    { key: "leader", label: "leader", num: true },
    { key: "replicas", label: "replicas", render: list },
    { key: "isr", label: "ISR", render: list },
    { key: "log_start_offset", label: "log start", num: true, render: fmt },
    { key: "log_end_offset", label: "log end", num: true, render: fmt },
    { key: "records", label: "records", num: true, render: fmt },
    { key: "bytes", label: "bytes", num: true, render: fmtBytes },
    { key: "segments", label: "segments", num: true, render: fmt },
  ], rows.map((r) => ({ attrs: { "data-partition": r.partition }, values: r }))));
  for (const note of snap.notes || []) el.append(h("div", { class: "pl-muted pl-note" }, note));
}

function renderBrowser(model, el) {
  const records = model.get("records") || [];
  const decode = model.get("decode");
  const pick = h("select", { class: "pl-select", "data-action": "decode", onchange: (e) => {
    model.set("decode", e.target.value);
    model.save_changes();
  } }, ["auto", "registry", "utf8", "json", "hex"].map((m) => h("option", { value: m, selected: m === decode ? "selected" : null }, m)));
  const refresh = h("button", { class: "pl-button", "data-action": "refresh",
    onclick: () => model.send({ type: "refresh" }) }, "Refresh");
  el.append(header(`Latest ${model.get("n")} records of ${model.get("topic")}`, model,
    h("span", {}, "decode: ", pick, refresh)));
  if (records.length === 0) {
    el.append(h("div", { class: "pl-muted", "data-field": "empty" }, "no records"));
    return;
  }
  el.append(table("pl-records", [
    { key: "partition", label: "partition", num: true },
    { key: "offset", label: "offset", num: true },
    { key: "timestamp", label: "timestamp", render: fmtTime },
    { key: "key", label: "key", render: (v) => h("code", {}, v ?? "null") },
    { key: "value", label: "value", render: (v) => h("code", {}, v ?? "null") },
  ], records.map((r) => ({ attrs: { "data-partition": r.partition, "data-offset": r.offset }, values: r }))));
}

// Two bars per broker (replicas, leaders), grouped: [{label, replicas, leaders}].
function brokerChart(items, { width = 520, barHeight = 12 } = {}) {
  const pad = { l: 40, r: 110 };
  const row = 2 * barHeight + 10;
  const height = Math.max(row, items.length * row + 6);
  const svg = s("svg", { class: "pl-chart pl-broker-chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const vmax = Math.max(1, ...items.map((it) => it.replicas || 0));
  items.forEach((it, i) => {
    const y = 4 + i * row;
    svg.append(s("text", { x: pad.l - 6, y: y + barHeight + 3, "text-anchor": "end", class: "pl-tick" }, it.label));
    [["replicas", "pl-bar"], ["leaders", "pl-bar pl-bar-alt"]].forEach(([key, cls], j) => {
      const v = it[key] || 0;
      const w = (v / vmax) * (width - pad.l - pad.r);
      const by = y + j * (barHeight + 2);
      const bar = s("rect", { x: pad.l, y: by, width: Math.max(w, v ? 1 : 0), height: barHeight, class: cls,
        "data-broker": it.node, "data-metric": key, "data-value": v });
      bar.append(s("title", {}, `broker ${it.node}: ${v} ${key}`));
      svg.append(bar);
      svg.append(s("text", { x: pad.l + w + 6, y: by + barHeight - 2, class: "pl-tick" }, `${fmt(v)} ${key}`));
    });
  });
  return svg;
}

function renderCluster(model, el) {
  const snap = model.get("snapshot") || { brokers: [] };
  const brokers = snap.brokers || [];
  const urp = snap.under_replicated || [], offline = snap.offline || [], moving = snap.reassignments || [];
  const refresh = h("button", { class: "pl-button", "data-action": "refresh",
    onclick: () => model.send({ type: "refresh" }) }, "Refresh");
  const toggle = h("button", { class: "pl-button", "data-action": "toggle",
    onclick: () => { model.set("running", !model.get("running")); model.save_changes(); } },
    model.get("running") ? "Pause" : "Resume");
  el.append(header(`Cluster ${snap.cluster_id || "?"}`, model, h("span", {}, refresh, toggle)));
  el.append(h("div", { class: "pl-summary" },
    "controller ", h("b", { "data-field": "controller" }, snap.controller_id ?? "–"),
    " · brokers ", h("b", { "data-field": "brokers" }, brokers.length),
    " · partitions ", h("b", { "data-field": "partitions" }, fmt(snap.partitions)),
    " · under-replicated ", h("b", { "data-field": "under-replicated", class: urp.length ? "pl-warn-text" : null }, urp.length),
    " · offline ", h("b", { "data-field": "offline", class: offline.length ? "pl-err-text" : null }, offline.length),
    " · moving ", h("b", { "data-field": "moving" }, moving.length),
    snap.updated_ms ? h("span", { class: "pl-muted" }, " · updated ", fmtTime(snap.updated_ms)) : null));
  el.append(h("div", { class: "pl-chart-box" }, brokerChart(brokers.map((b) => ({
    label: `b${b.node_id}`, node: b.node_id, replicas: b.replicas, leaders: b.leaders })))));
  el.append(table("pl-brokers", [
    { key: "node_id", label: "broker", num: true, render: (v) => (v === snap.controller_id ? `${v}*` : v) },
    { key: "host", label: "host" },
    { key: "port", label: "port", num: true },
    { key: "rack", label: "rack" },
    { key: "replicas", label: "replicas", num: true, render: fmt },
    { key: "leaders", label: "leaders", num: true, render: fmt },
  ], brokers.map((b) => ({ attrs: { "data-broker": b.node_id }, values: b }))));
  const hist = snap.moving_history || [];
  if (moving.length || hist.some((p) => p[1] > 0)) {
    el.append(h("div", { class: "pl-chart-box" }, lineChart([{ name: "partitions moving", points: hist }])));
  }
  const list = (v) => (v && v.length ? v.join(", ") : "–");
  const parts = (title, cls, items) => {
    if (!items.length) return;
    el.append(h("div", { class: "pl-subtitle" }, title));
    el.append(table(cls, [
      { key: "topic", label: "topic" },
      { key: "partition", label: "partition", num: true },
      { key: "leader", label: "leader", num: true },
      { key: "replicas", label: "replicas", render: list },
      { key: "isr", label: "ISR", render: list },
      { key: "adding_replicas", label: "adding", render: list },
      { key: "removing_replicas", label: "removing", render: list },
    ], items.map((p) => ({ attrs: { "data-topic": p.topic, "data-partition": p.partition }, values: p }))));
  };
  parts("Reassignments in progress", "pl-moving", moving);
  parts("Under-replicated partitions", "pl-urp", urp);
  parts("Offline partitions", "pl-offline", offline);
}

function fmtValue(v) {
  if (v === null || v === undefined) return "–";
  const n = Number(v);
  return Math.abs(n) >= 100 || Number.isInteger(n) ? Math.round(n).toLocaleString("en-US") : n.toPrecision(3);
}

function renderClients(model, el) {
  const snap = model.get("snapshot") || { clients: [], columns: [] };
  const running = model.get("running");
  const toggle = h("button", { class: "pl-button", "data-action": "toggle", onclick: () => {
    model.set("running", !model.get("running"));
    model.save_changes();
  } }, running ? "Pause" : "Resume");
  const refresh = h("button", { class: "pl-button", "data-action": "refresh",
    onclick: () => model.send({ type: "refresh" }) }, "Refresh");
  const info = h("span", { class: "pl-muted" },
    (running ? `live, every ${model.get("interval_s")}s` : "paused") + ` · updated ${fmtTime(snap.updated_ms)}`);
  el.append(header("Client metrics", model, h("span", {}, info, toggle, refresh)));
  const clients = snap.clients || [];
  if (clients.length === 0) {
    el.append(h("div", { class: "pl-muted", "data-field": "empty" }, "no client has asked for a telemetry subscription yet"));
    return;
  }
  const columns = snap.columns || [];
  el.append(table("pl-clients", [
    { key: "client_id", label: "client id" },
    { key: "kind", label: "kind" },
    { key: "software", label: "software" },
    { key: "client_source_address", label: "address" },
    { key: "broker", label: "broker", num: true },
    { key: "pushes", label: "pushes", num: true, render: fmt },
    { key: "pushed_at_ms", label: "last push", render: fmtTime },
    ...columns.map((c) => ({ key: c.metric, label: c.label, num: true, render: fmtValue })),
  ], clients.map((c) => ({
    attrs: { "data-client": c.client_instance_id, "data-client-id": c.client_id || "" },
    values: { ...c, ...(c.highlights || {}),
      software: `${c.client_software_name || "?"} ${c.client_software_version || ""}`.trim() },
  }))));
  for (const c of clients) {
    const metrics = c.metrics || [];
    if (metrics.length === 0) continue;
    el.append(h("details", { class: "pl-client", "data-client": c.client_instance_id },
      h("summary", {}, `${c.client_id || c.client_instance_id}: ${metrics.length} metrics`),
      table("pl-client-metrics", [
        { key: "metric", label: "metric" },
        { key: "node", label: "node" },
        { key: "value", label: "value", num: true, render: fmtValue },
        { key: "unit", label: "unit" },
      ], metrics.map((m) => ({ attrs: { "data-metric": m.metric }, values: m })))));
  }
}

function renderLive(model, el) {
  const records = model.get("records") || [];
  const rates = model.get("rates") || [];
  const running = model.get("running");
  const toggle = h("button", { class: "pl-button", "data-action": "toggle", onclick: () => {
    model.set("running", !model.get("running"));
    model.save_changes();
  } }, running ? "Pause" : "Resume");
  const rate = rates.length ? rates[rates.length - 1][1] : 0;
  const info = h("span", { class: "pl-muted" }, running ? "following" : "paused", " · records ",
    h("b", { "data-field": "total", "data-value": model.get("total") }, fmt(model.get("total"))), " · now ",
    h("b", { "data-field": "rate", "data-value": rate }, Number(rate).toFixed(1)), "/s");
  el.append(header(`Following ${model.get("topic")}`, model, h("span", {}, info, toggle)));
  el.append(h("div", { class: "pl-chart-box" }, lineChart([{ name: "records/s", points: rates }], { height: 100 })));
  if (records.length === 0) {
    el.append(h("div", { class: "pl-muted", "data-field": "empty" }, "no records yet"));
    return;
  }
  el.append(table("pl-records", [
    { key: "partition", label: "partition", num: true },
    { key: "offset", label: "offset", num: true },
    { key: "timestamp", label: "timestamp", render: fmtTime },
    { key: "key", label: "key", render: (v) => h("code", {}, v ?? "null") },
    { key: "value", label: "value", render: (v) => h("code", {}, v ?? "null") },
  ], records.map((r) => ({ attrs: { "data-partition": r.partition, "data-offset": r.offset }, values: r }))));
}

const VIEWS = { lag: renderLag, partitions: renderPartitions, browser: renderBrowser, cluster: renderCluster,
  clients: renderClients, live: renderLive };

function render({ model, el }) {
  const root = h("div", { class: "pylog-widget" });
  el.append(root);
  const draw = () => {
    root.replaceChildren();
    root.setAttribute("data-kind", model.get("kind"));
    (VIEWS[model.get("kind")] || (() => root.append("unknown pylog widget")))(model, root);
  };
  draw();
  const names = ["snapshot", "history", "running", "error", "records", "metric", "decode", "n", "topic", "rates",
    "total"];
  for (const name of names) model.on(`change:${name}`, draw);
  return () => { for (const name of names) model.off(`change:${name}`, draw); };
}

export default { render };
