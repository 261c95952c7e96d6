// The live page: draws the graph the server laid out (/api/graph), then
// keeps it current from the event stream (/api/events). No dependencies.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const graphSvg = document.getElementById("graph");
const panelEmpty = document.getElementById("panel-empty");
const panel = document.getElementById("panel-content");
const connection = document.getElementById("connection");
const totals = document.getElementById("totals");

const page = {
  layout: null,
  nodes: new Map(),        // node id -> { node, g }
  controllers: new Map(),  // controller name -> view from the server
  counts: new Map(),       // "namespace\u0000type" -> count
  selected: null,          // { kind: "type", type, namespace } | { kind: "resource", ... } | { kind: "controller", name }
  refresh: null,           // the pending refresh of the panel
};

function el(name, attributes, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function html(tag, text, parent, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (className) node.className = className;
  if (parent) parent.appendChild(node);
  return node;
}

async function fetchJson(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// The graph.

async function loadGraph() {
  const layout = await fetchJson("/api/graph");
  page.layout = layout;
  drawGraph(layout);
}

function drawGraph(layout) {
  graphSvg.replaceChildren();
  page.nodes.clear();
  graphSvg.setAttribute("viewBox", `0 0 ${layout.width} ${layout.height}`);
  applyZoom();

  const defs = el("defs", {}, graphSvg);
  for (const [name, color] of [["plain", "#9aa3b2"], ["bold", "#475569"], ["dashed", "#9aa3b2"], ["output", "#60a5fa"]]) {
    const marker = el("marker", { id: `arrow-${name}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: color }, marker);
  }

  const bands = el("g", { class: "bands" }, graphSvg);
  for (const band of layout.bands) {
    const g = el("g", { class: "band", "data-namespace": band.namespace }, bands);
    el("rect", { x: 8, y: band.y, width: layout.width - 16, height: band.height }, g);
    const label = el("text", { x: 20, y: band.y + 22 }, g);
    label.textContent = band.namespace || "(no namespace)";
  }

  const byId = new Map(layout.nodes.map((node) => [node.id, node]));
  const edges = el("g", { class: "edges" }, graphSvg);
  for (const edge of layout.edges) {
    const from = byId.get(edge.from), to = byId.get(edge.to);
    if (!from || !to) continue;
    let d;
    if (to.x > from.x + from.width) {
      const x1 = from.x + from.width, y1 = from.y + from.height / 2;
      const x2 = to.x, y2 = to.y + to.height / 2;
      const bend = Math.max(40, (x2 - x1) / 2);
      d = `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2 - 2} ${y2}`;
    } else {
      // Against the flow (a controller reading what it writes): a loop below both boxes.
      const x1 = from.x + from.width * 0.4, y1 = from.y + from.height;
      const x2 = to.x + to.width * 0.6, y2 = to.y + to.height + 2;
      const low = Math.max(y1, y2) + 26;
      d = `M ${x1} ${y1} C ${x1} ${low}, ${x2} ${low}, ${x2} ${y2}`;
    }
    const path = el("path", {
      d,
      class: `edge ${edge.style}`, "marker-end": `url(#arrow-${edge.style})`,
      "data-from": edge.from, "data-to": edge.to,
    }, edges);
    const title = el("title", {}, path);
    title.textContent = edge.direction === "input"
      ? `${to.name} reads ${from.name} (${edge.kind}, ${edge.label})`
      : `${from.name} writes ${to.name} (${edge.kind})`;
  }

  const nodes = el("g", { class: "nodes" }, graphSvg);
  for (const node of layout.nodes) {
    const g = el("g", { class: `node ${node.kind}`, "data-id": node.id, "data-name": node.name,
      transform: `translate(${node.x},${node.y})` }, nodes);
    el("rect", { class: "box", width: node.width, height: node.height }, g);
    const title = el("title", {}, g);
    title.textContent = node.name;
    if (node.kind === "controller") {
      const dot = node.name.indexOf(".");
      const group = el("text", { class: "group", x: 10, y: 14 }, g);
      group.textContent = dot > 0 ? node.name.slice(0, dot) : "";
      const name = el("text", { class: "name", x: 10, y: 30 }, g);
      name.textContent = node.label;
      el("circle", { class: "state", cx: 14, cy: 44, r: 4.5 }, g);
      el("text", { class: "stats", x: 24, y: 48 }, g);
      g.addEventListener("click", () => select({ kind: "controller", name: node.name }));
    } else {
      const name = el("text", { class: "name", x: 14, y: node.height / 2 + 4 }, g);
      name.textContent = node.label;
      const count = el("g", { class: "count" }, g);
      el("rect", { x: node.width - 40, y: node.height / 2 - 9, width: 30, height: 18 }, count);
      el("text", { x: node.width - 25, y: node.height / 2 + 4, "text-anchor": "middle" }, count);
      g.addEventListener("click", () => select({ kind: "type", type: node.name, namespace: null }));
    }
    page.nodes.set(node.id, { node, g });
  }
  for (const name of page.controllers.keys()) drawController(name);
  for (const type of new Set([...page.counts.keys()].map((key) => key.split("\u0000")[1]))) drawCount(type);
  markSelected();
}

// Zoom: the whole graph fits the pane's width unless that would make it
// smaller than three quarters; the buttons and Ctrl+wheel change it.
const zoom = { scale: null };

function fitScale() {
  const pane = document.getElementById("graph-pane");
  if (!page.layout) return 1;
  return Math.min(1, Math.max(0.75, (pane.clientWidth - 4) / page.layout.width));
}

function applyZoom() {
  if (!page.layout) return;
  const scale = zoom.scale === null ? fitScale() : zoom.scale;
  graphSvg.setAttribute("width", Math.round(page.layout.width * scale));
  graphSvg.setAttribute("height", Math.round(page.layout.height * scale));
  document.getElementById("zoom-level").textContent = `${Math.round(scale * 100)}%`;
}

function setZoom(scale) {
  zoom.scale = scale === null ? null : Math.min(2, Math.max(0.2, scale));
  applyZoom();
}

function currentScale() {
  return zoom.scale === null ? fitScale() : zoom.scale;
}

document.getElementById("zoom-in").addEventListener("click", () => setZoom(currentScale() * 1.25));
document.getElementById("zoom-out").addEventListener("click", () => setZoom(currentScale() / 1.25));
document.getElementById("zoom-fit").addEventListener("click", () => setZoom(null));
document.getElementById("graph-pane").addEventListener("wheel", (event) => {
  if (!event.ctrlKey) return;
  event.preventDefault();
  setZoom(currentScale() * (event.deltaY < 0 ? 1.1 : 1 / 1.1));
}, { passive: false });
window.addEventListener("resize", () => { if (zoom.scale === null) applyZoom(); });

function drawController(name) {
  const entry = page.nodes.get(`c:${name}`);
  const view = page.controllers.get(name);
  if (!entry || !view) return;
  const { g } = entry;
  g.classList.toggle("failing", view.state !== "running");
  g.setAttribute("data-state", view.state);
  const stats = g.querySelector("text.stats");
  stats.textContent = describe(view);
  g.querySelector("title").textContent = view.lastError ? `${name}\nlast error: ${view.lastError}` : name;
}

// Running, failing (with the time to its next retry), restarting (the retry
// is due), or stopped (a controller whose task ended, which is not retried).
function describe(view) {
  switch (view.state) {
    case "running": return `${view.rate.toFixed(1)}/s · ${view.reconciles} runs`;
    case "stopped": return "stopped";
    default: {
      const wait = view.nextRetryMs ? (view.nextRetryMs - Date.now()) / 1000 : 0;
      return wait > 0.05 ? `failing · retry in ${wait.toFixed(1)} s` : `restarting · ${view.restarts} restarts`;
    }
  }
}

// The time to the next retry counts down between events.
setInterval(() => {
  for (const [name, view] of page.controllers) {
    if (view.state !== "failing") continue;
    if (page.selected && page.selected.kind === "controller" && page.selected.name === name) showController(name);
    else drawController(name);
  }
}, 200);

function countOf(type) {
  let total = 0;
  for (const [key, count] of page.counts) if (key.split("\u0000")[1] === type) total += count;
  return total;
}

function drawCount(type) {
  const entry = page.nodes.get(`t:${type}`);
  if (!entry) return;
  const total = countOf(type);
  entry.g.setAttribute("data-count", total);
  entry.g.querySelector(".count text").textContent = total;
  const where = [...page.counts].filter(([key]) => key.split("\u0000")[1] === type)
    .map(([key, count]) => `${key.split("\u0000")[0]}: ${count}`);
  entry.g.querySelector("title").textContent = `${type}\n${where.join("\n")}`;
}

function flash(id, className) {
  const entry = page.nodes.get(id);
  if (!entry) return;
  entry.g.classList.remove(className);
  void entry.g.getBBox();
  entry.g.classList.add(className);
}

function drawTotals() {
  const controllers = [...page.controllers.values()];
  const failing = controllers.filter((view) => view.state !== "running").length;
  const resources = [...page.counts.values()].reduce((a, b) => a + b, 0);
  const rate = controllers.reduce((sum, view) => sum + view.rate, 0);
  totals.innerHTML = "";
  html("b", controllers.length, totals);
  totals.append(" controllers · ");
  html("b", resources, totals);
  totals.append(` resources · ${rate.toFixed(1)} reconciles/s`);
  if (failing > 0) html("span", ` · ${failing} failing`, totals, "failing");
}

// The panel.

function select(selection) {
  page.selected = selection;
  markSelected();
  refreshPanel();
}

function markSelected() {
  for (const { g } of page.nodes.values()) g.classList.remove("selected");
  for (const path of graphSvg.querySelectorAll(".edge.highlight")) path.classList.remove("highlight");
  const selection = page.selected;
  if (!selection) return;
  const id = selection.kind === "controller" ? `c:${selection.name}` : `t:${selection.type}`;
  const entry = page.nodes.get(id);
  if (entry) entry.g.classList.add("selected");
  for (const path of graphSvg.querySelectorAll(".edge")) {
    if (path.dataset.from === id || path.dataset.to === id) path.classList.add("highlight");
  }
}

function refreshPanelSoon() {
  if (page.refresh) return;
  page.refresh = setTimeout(() => { page.refresh = null; refreshPanel(); }, 50);
}

async function refreshPanel() {
  const selection = page.selected;
  if (!selection) return;
  panelEmpty.hidden = true;
  panel.hidden = false;
  try {
    if (selection.kind === "controller") showController(selection.name);
    else if (selection.kind === "type") await showType(selection);
    else await showResource(selection);
  } catch (error) {
    if (page.selected !== selection) return;
    panel.replaceChildren();
    html("h2", selection.type || selection.name, panel);
    html("p", String(error.message || error), panel, "error");
  }
}

function showController(name) {
  // The box and the panel say the same, from the same moment.
  drawController(name);
  const view = page.controllers.get(name);
  const node = page.nodes.get(`c:${name}`);
  panel.replaceChildren();
  html("h2", name, panel);
  if (!view) { html("p", "no status published yet", panel); return; }
  const table = html("table", null, panel);
  const body = html("tbody", null, table);
  const row = (key, value, className) => {
    const tr = html("tr", null, body);
    html("th", key, tr);
    html("td", value, tr, className);
  };
  const [state, retry] = describe(view).split(" · ");
  row("state", view.state === "running" ? "running" : state, view.state === "running" ? "" : "error");
  if (state === "failing") row("next retry", retry.replace("retry ", ""));
  row("reconciles per second", view.rate.toFixed(1));
  row("reconciles", view.reconciles);
  row("errors", view.errors);
  row("restarts", view.restarts);
  if (view.lastError) row("last error", view.lastError, "error");
  if (view.longPolls) {
    const longest = view.longestPollMs === undefined ? "" : `, the longest ${view.longestPollMs} ms`;
    row("long polls", `${view.longPolls}${longest}: it holds its thread; move heavy work to spawn_blocking`, "error");
  }
  if (node && page.layout) {
    const reads = page.layout.edges.filter((edge) => edge.to === node.node.id);
    const writes = page.layout.edges.filter((edge) => edge.from === node.node.id);
    html("h2", "Reads", panel).style.marginTop = "16px";
    const list = html("ul", null, panel);
    for (const edge of reads) html("li", `${edge.from.slice(2)} (${edge.kind}, ${edge.label})`, list);
    html("h2", "Writes", panel);
    const out = html("ul", null, panel);
    for (const edge of writes) html("li", `${edge.to.slice(2)} (${edge.kind})`, out);
  }
}

async function showType(selection) {
  const query = selection.namespace ? `?namespace=${encodeURIComponent(selection.namespace)}` : "";
  const listing = await fetchJson(`/api/types/${encodeURIComponent(selection.type)}${query}`);
  if (page.selected !== selection) return;
  selection.namespace = listing.namespace;
  panel.replaceChildren();
  html("h2", listing.display_type, panel);
  const sub = html("div", listing.type, panel, "sub");
  if (listing.namespaces.length > 1) {
    const choose = html("select", null, sub);
    for (const namespace of listing.namespaces) {
      const option = html("option", namespace, choose);
      option.value = namespace;
      option.selected = namespace === listing.namespace;
    }
    choose.addEventListener("change", () => select({ kind: "type", type: selection.type, namespace: choose.value }));
  } else {
    sub.append(` in ${listing.namespace}`);
  }
  if (listing.sensitive) html("p", "sensitive: shown because the page was asked to show sensitive types", panel);
  const table = html("table", null, panel);
  table.id = "resources";
  const head = html("tr", null, html("thead", null, table));
  for (const column of ["ID", "Version", ...listing.columns]) html("th", column, head);
  const body = html("tbody", null, table);
  for (const row of listing.rows) {
    const tr = html("tr", null, body);
    tr.dataset.id = row.id;
    for (const cell of [row.id, row.version, ...row.cells]) html("td", cell, tr);
    if (selection.changed === row.id) tr.classList.add("changed");
    tr.addEventListener("click", () => select({ kind: "resource", type: selection.type,
      namespace: listing.namespace, id: row.id, display: listing.display_type }));
  }
  if (listing.rows.length === 0) html("p", `no ${listing.display_type} in ${listing.namespace}`, panel);
  selection.changed = null;
}

async function showResource(selection) {
  // The ID as a query: in the path, a browser would resolve `.` or `..` away.
  const path = [selection.namespace, selection.type].map(encodeURIComponent).join("/");
  const url = `/api/resources/${path}?id=${encodeURIComponent(selection.id)}`;
  const response = await fetch(url);
  const text = await response.text();
  if (page.selected !== selection) return;
  panel.replaceChildren();
  const back = html("span", `← all ${selection.display || selection.type}`, panel, "back");
  back.addEventListener("click", () => select({ kind: "type", type: selection.type, namespace: selection.namespace }));
  html("h2", selection.id, panel);
  html("div", `${selection.type} in ${selection.namespace}`, panel, "sub");
  if (!response.ok) {
    let message = text;
    try { message = JSON.parse(text).error; } catch (_) { /* not JSON */ }
    html("p", message, panel, "error");
    return;
  }
  const pre = html("pre", text, panel);
  pre.id = "resource-yaml";
  if (selection.changed) pre.classList.add("changed");
  selection.changed = false;
}

// The event stream.

function connect() {
  const events = new EventSource("/api/events");
  events.addEventListener("open", () => { connection.textContent = "connecting"; connection.className = "connecting"; });
  events.addEventListener("error", () => { connection.textContent = "reconnecting"; connection.className = "lost"; });
  events.addEventListener("ready", () => { connection.textContent = "live"; connection.className = "live"; });
  events.addEventListener("controller", (event) => {
    const view = JSON.parse(event.data);
    const before = page.controllers.get(view.name);
    page.controllers.set(view.name, view);
    drawController(view.name);
    if (before && before.reconciles !== view.reconciles) flash(`c:${view.name}`, "pulse");
    if (page.selected && page.selected.kind === "controller" && page.selected.name === view.name) showController(view.name);
    drawTotals();
  });
  events.addEventListener("count", (event) => {
    const count = JSON.parse(event.data);
    page.counts.set(`${count.namespace}\u0000${count.type}`, count.count);
    drawCount(count.type);
    drawTotals();
  });
  events.addEventListener("resource", (event) => {
    const change = JSON.parse(event.data);
    flash(`t:${change.type}`, "flash");
    const selection = page.selected;
    if (!selection || selection.type !== change.type || selection.namespace !== change.namespace) return;
    if (selection.kind === "type") {
      selection.changed = change.id;
      refreshPanelSoon();
    } else if (selection.kind === "resource" && selection.id === change.id) {
      selection.changed = true;
      refreshPanelSoon();
    }
  });
  events.addEventListener("graph", () => { loadGraph().catch(showFailure); });
  events.addEventListener("failure", (event) => {
    const failure = JSON.parse(event.data);
    console.warn(`the watch of ${failure.namespace}/${failure.type} failed: ${failure.error}`);
  });
}

function showFailure(error) {
  panelEmpty.hidden = true;
  panel.hidden = false;
  panel.replaceChildren();
  html("h2", "The graph cannot be loaded", panel);
  html("p", String(error.message || error), panel, "error");
}

loadGraph().then(connect, showFailure);
