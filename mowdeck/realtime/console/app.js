// The Mowdeck operator console: plain JavaScript, no build step, nothing loaded from outside.
// It calls Fleet, Telemetry and Notifications with the bearer token kept in session storage,
// and follows the Realtime stream (or, without one, polls Telemetry).
"use strict";

const TOKEN_KEY = "mowdeck.token";
const TRACK_POINTS = 240;
const STALE_MS = 30000;
const POLL_MS = 2000;

const state = {
  config: null,
  token: null,
  mowers: new Map(), // mower_id -> {id, name, state, track: [[lat, lon]], link, seenAt}
  selected: null,
  commands: new Map(), // command_id -> {id, mower_id, kind, statuses: [{status, at, reason}]}
  kindOf: new Map(), // command_id -> kind, for results that do not name it
  source: null,
  lastEventId: null,
  mode: "connecting",
  inboxSeen: null,
  alarms: new Map(), // alarm id -> the alarm as GET /v1/alarms or the stream's alarm event has it
  timers: [],
};

const $ = (id) => document.getElementById(id);

// What the console's other scripts (sites.js, ...) hook into; they load after this one and
// register before start() runs (main() awaits the config first).
//   start: [async () => {}]          after the mowers are loaded
//   visible: [(m) => bool]           which mowers the list and the map show
//   list: [(mowers) => items]        reorders the list; an item {header, key} is a group row
//   mapPoints: [() => [[lat, lon]]]  more points the map frames and centres on
//   mapLayers: [(project, toScreen) => [svg nodes]]  drawn under the mowers
//   select: [(id) => {}]             a mower was selected
const hooks = { start: [], visible: [], list: [], mapPoints: [], mapLayers: [], select: [] };

// --- the console's own texts, in the user's language (preferences' locale) ---------------

const DE = {
  "Enable push on this device": "Push auf diesem Gerät", "Notification settings": "Benachrichtigungen",
  "Audit": "Protokoll", "STOP selected": "STOPP Auswahl", "STOP ALL": "ALLE STOPP",
  "Sign in": "Anmelden", "Nobody tells you about your mowers yet.": "Noch erfahren Sie nichts über Ihre Mäher.",
  "Notify me about all my mowers": "Über alle meine Mäher benachrichtigen", "Choose…": "Auswählen…",
  "About which mowers": "Über welche Mäher", "none": "keine", "all my mowers": "alle meine Mäher", "these:": "diese:",
  "What": "Was", "Quiet hours": "Ruhezeiten", "keep quiet from": "Ruhe von", "to": "bis",
  "critical alarms break them": "kritische Alarme dürfen stören", "Where you are told": "Wohin",
  "ntfy server": "ntfy-Server", "topic": "Thema", "Add ntfy topic": "ntfy-Thema hinzufügen",
  "Where and how": "Wo und wie", "Time zone": "Zeitzone", "Language": "Sprache", "Save": "Speichern",
  "Close": "Schließen", "Audit trail": "Protokoll", "Mower": "Mäher", "every mower": "alle Mäher",
  "Kind": "Art", "every kind": "alle Arten", "From": "Von", "To": "Bis", "Show": "Anzeigen",
  "Export (JSON lines)": "Exportieren (JSON-Zeilen)", "Issued": "Erteilt", "By": "Von", "Outcome": "Ergebnis",
  "More": "Mehr", "Garden": "Garten", "follow selected": "Auswahl folgen", "Mowers": "Mäher",
  "Add mower": "Mäher hinzufügen", "Name": "Name", "Connection": "Verbindung", "Options (JSON)": "Optionen (JSON)",
  "Register": "Registrieren", "Cancel": "Abbrechen", "Activity": "Tätigkeit", "Battery": "Akku", "Link": "Verbindung",
  "Seen": "Gesehen", "Select a mower": "Mäher auswählen", "Start": "Start", "Pause": "Pause",
  "Resume": "Fortsetzen", "Dock": "Parken", "Blade": "Messer", "Set": "Setzen", "Speed": "Tempo",
  "Rename": "Umbenennen", "Remove mower": "Mäher entfernen", "Battery, last hour": "Akku, letzte Stunde",
  "Commands": "Befehle", "Alarms of this mower": "Alarme dieses Mähers", "Alarms": "Alarme",
  "Notifications": "Benachrichtigungen", "open": "offen", "unread": "ungelesen", "Acknowledge": "Bestätigen",
  "Assign to me": "Mir zuweisen", "acknowledged by": "bestätigt von", "assigned to": "zugewiesen an",
  "ago": "her", "comment": "Kommentar", "alarm raised": "Alarm ausgelöst", "Settings saved": "Einstellungen gespeichert",
  "Subscribed": "Abonniert", "Remove": "Entfernen", "Remove this device": "Dieses Gerät entfernen",
};
const ORIGINAL = new WeakMap(); // a translated text node -> its English

function t(text) {
  return state.locale === "de" ? DE[text] || text : text;
}

// The page's fixed texts in ``state.locale``: every text node whose English is known.
function translatePage() {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const english = ORIGINAL.get(node) ?? node.nodeValue.trim();
    if (!DE[english]) continue;
    ORIGINAL.set(node, english);
    const lead = node.nodeValue.match(/^\s*/)[0];
    const tail = node.nodeValue.match(/\s*$/)[0];
    node.nodeValue = lead + t(english) + tail;
  }
  document.documentElement.lang = state.locale || "en";
}
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

// --- API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

async function api(base, path, options = {}) {
  const headers = { Authorization: `Bearer ${state.token}`, ...(options.headers || {}) };
  let body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  }
  const response = await fetch(base + path, { method: options.method || "GET", headers, body });
  if (response.status === 401) {
    signOut("The token was refused: sign in again.");
    throw new ApiError(401, "unauthorized");
  }
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    throw new ApiError(response.status, (data && (data.detail || data.title)) || response.statusText);
  }
  return data;
}

const fleet = (path, options) => api(state.config.fleet_url, path, options);
const telemetry = (path, options) => api(state.config.telemetry_url, path, options);
const notifications = (path, options) => api(state.config.notifications_url, path, options);

function realtimeBase() {
  return state.config.realtime_url || window.location.origin;
}

// --- sign-in ---------------------------------------------------------------------------

async function signIn() {
  const params = new URLSearchParams(window.location.search);
  const code = params.get("code");
  if (code) {
    // The code is used once: take it out of the address bar (and the history) at once.
    params.delete("code");
    const rest = params.toString();
    history.replaceState(null, "", window.location.pathname + (rest ? `?${rest}` : ""));
    const response = await fetch("/console/exchange", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code }),
    });
    const data = await response.json().catch(() => ({}));
    if (response.ok && data.token) {
      sessionStorage.setItem(TOKEN_KEY, data.token);
    } else if (!sessionStorage.getItem(TOKEN_KEY)) {
      $("signin-error").textContent = data.detail || "the sign-in code was refused";
    }
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  if (state.source) state.source.close();
  state.timers.forEach(clearInterval);
  state.timers = [];
  $("console").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
}

// --- the live stream -------------------------------------------------------------------

function setMode(mode, text) {
  state.mode = mode;
  const pill = $("link-status");
  pill.className = `pill ${mode}`;
  pill.textContent = text;
}

async function connectStream(delay = 0) {
  if (state.config.realtime_url === null) {
    setMode("poll", "polling Telemetry (no live stream configured)");
    return;
  }
  if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
  if (!state.token) return;
  let ticket;
  try {
    ticket = (await api(realtimeBase(), "/v1/stream/tickets", { method: "POST" })).ticket;
  } catch (err) {
    setMode("poll", "live stream unavailable: polling");
    connectStream(Math.min(30000, (delay || 1000) * 2));
    return;
  }
  const query = new URLSearchParams({ ticket });
  if (state.lastEventId) query.set("since", state.lastEventId);
  const source = new EventSource(`${realtimeBase()}/v1/stream?${query}`);
  state.source = source;
  source.onopen = () => setMode("live", "live");
  source.onerror = () => {
    // A ticket is good for one connection: reconnect with a fresh one, from the last event.
    source.close();
    if (state.source === source) state.source = null;
    setMode("down", "reconnecting…");
    connectStream(1000);
  };
  const on = (type, handler) =>
    source.addEventListener(type, (event) => {
      if (event.lastEventId) state.lastEventId = event.lastEventId;
      handler(JSON.parse(event.data));
    });
  on("state", (data) => applyState(data));
  on("command", (data) => applyResult(data));
  on("link", (data) => applyLink(data));
  on("notification", (data) => {
    toast(data.title || data.kind || "Notification", data.body || "", data.severity);
    loadInbox();
  });
  on("alarm", (data) => applyAlarm(data));
  on("resync", () => { loadStates(); quietly(loadAlarms()); });
}

// --- fleet state -----------------------------------------------------------------------

function mower(id) {
  let m = state.mowers.get(id);
  if (!m) {
    m = { id, name: id.slice(0, 8), state: null, track: [], link: null, stale: false };
    state.mowers.set(id, m);
  }
  return m;
}

function applyState(s, render = true) {
  const m = mower(s.mower_id);
  if (m.state && m.state.observed_at > s.observed_at) return;
  m.state = s;
  m.stale = Boolean(s.stale);
  if (s.position) {
    const last = m.track[m.track.length - 1];
    if (!last || last[0] !== s.position.lat || last[1] !== s.position.lon) {
      m.track.push([s.position.lat, s.position.lon]);
      if (m.track.length > TRACK_POINTS) m.track.shift();
    }
  }
  if (render) scheduleRender();
}

function linkOf(data) {
  if (typeof data.connected === "boolean") return data.connected;
  for (const key of ["link", "status", "state", "event", "type"]) {
    const v = data[key];
    if (typeof v === "string" && v.endsWith("disconnected")) return false;
    if (typeof v === "string" && v.endsWith("connected")) return true;
  }
  return null;
}

function applyLink(data) {
  const m = mower(data.mower_id);
  m.link = linkOf(data);
  m.linkReason = data.reason || "";
  scheduleRender();
}

function applyResult(r) {
  const kind = r.kind || state.kindOf.get(r.command_id) || null;
  let c = state.commands.get(r.command_id);
  if (!c) {
    c = { id: r.command_id, mower_id: r.mower_id, kind, statuses: [] };
    state.commands.set(r.command_id, c);
  }
  if (kind) c.kind = kind;
  if (!c.statuses.some((s) => s.status === r.status)) {
    c.statuses.push({ status: r.status, at: r.at, reason: r.reason });
    c.statuses.sort((a, b) => (a.at < b.at ? -1 : 1));
  }
  if (r.mower_id === state.selected) renderTimeline();
}

// Every item of a list endpoint, page after page: `after` continues while `has_more`.
async function allPages(get, path, key) {
  const items = [];
  let after = null;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const data = await get(after ? `${path}${sep}after=${encodeURIComponent(after)}` : path);
    items.push(...data[key]);
    after = data.has_more ? data.next_after : null;
  } while (after);
  return items;
}

async function loadMowers() {
  for (const view of await allPages(fleet, "/v1/mowers?limit=1000", "mowers")) {
    Object.assign(mower(view.mower_id),
      { name: view.name, kind: view.connection?.kind, site: view.site_id || null });
  }
}

async function loadStates() {
  for (const s of await allPages(telemetry, "/v1/states?limit=1000", "items")) applyState(s, false);
  scheduleRender();
}

// --- commands --------------------------------------------------------------------------

async function send(mowerId, command) {
  const data = await fleet(`/v1/mowers/${mowerId}/commands`, { method: "POST", json: { command } });
  state.kindOf.set(data.command_id, command.kind);
  applyResult({ command_id: data.command_id, mower_id: mowerId, status: "issued",
    at: new Date().toISOString(), kind: command.kind });
  return data;
}

async function command(command) {
  $("command-error").textContent = "";
  if (!state.selected) return;
  try {
    await send(state.selected, command);
  } catch (err) {
    $("command-error").textContent = `${command.kind}: ${err.message}`;
  }
}

async function stopAll() {
  const ids = [...state.mowers.keys()];
  const outcomes = await Promise.allSettled(
    ids.map((id) => send(id, { kind: "emergency_stop", reason: "console: stop all" })),
  );
  const failed = outcomes.filter((o) => o.status === "rejected").length;
  toast("Emergency stop sent", failed ? `${failed} of ${ids.length} could not be sent`
    : `to all ${ids.length} mowers`, failed ? "critical" : "info", "console");
}

// --- rendering -------------------------------------------------------------------------

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderList();
    renderMap();
    renderDetailHead();
  });
}

function isStale(m) {
  if (!m.state) return true;
  return m.stale || Date.now() - Date.parse(m.state.observed_at) > STALE_MS;
}

function age(iso) {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

function shownMowers() {
  return [...state.mowers.values()].filter((m) => hooks.visible.every((shows) => shows(m)));
}

function sortedMowers() {
  return shownMowers().sort((a, b) => a.name.localeCompare(b.name));
}

function linkText(m) {
  if (m.link === true) return "up";
  if (m.link === false) return "down";
  if (m.state && m.state.activity === "offline") return "down";
  return m.state && !isStale(m) ? "up" : "?";
}

function renderList() {
  const body = $("mowers").tBodies[0];
  const items = hooks.list.reduce((list, order) => order(list), sortedMowers());
  const rows = items.map((m) => {
    if (m.header !== undefined) {
      return el("tr", { class: "group", "data-group": m.key }, el("th", { colSpan: 6 }, m.header));
    }
    const s = m.state;
    const activity = s ? s.activity : "unknown";
    const tr = el("tr", { "data-mower": m.id, class: [m.id === state.selected ? "selected" : "",
      isStale(m) ? "stale" : ""].join(" ").trim() },
      el("td", {}, m.name),
      el("td", {}, mowerBrand(m)),
      el("td", {}, el("span", { class: `act act-${activity}`, "data-activity": activity }, activity)),
      el("td", {}, s ? `${Math.round(s.battery)} %${s.charging ? " ⚡" : ""}` : "—"),
      el("td", {}, s ? s.rtk_fix : "—"),
      el("td", { title: m.linkReason || "" }, linkText(m)),
      el("td", {}, s ? (isStale(m) ? `stale, ${age(s.observed_at)}` : age(s.observed_at)) : "—"));
    tr.onclick = () => select(m.id);
    return tr;
  });
  body.replaceChildren(...rows);
  const shown = items.filter((m) => m.header === undefined).length;
  $("mower-count").textContent = shown === state.mowers.size ? `${shown} mowers` : `${shown} of ${state.mowers.size} mowers`;
}

const ACTIVITY_COLOUR = {
  mowing: "#2e7d32", leaving: "#558b2f", returning: "#558b2f", charging: "#1565c0",
  docked: "#1565c0", idle: "#1565c0", paused: "#c77700", manual: "#c77700",
  stopped: "#c62828", error: "#c62828", offline: "#8a948b",
};

function renderMap() {
  const map = $("map");
  const W = 800, H = 500, PAD = 30;
  const withPos = shownMowers().filter((m) => m.state && m.state.position);
  const extra = hooks.mapPoints.flatMap((points) => points());
  if (!withPos.length && !extra.length) {
    map.replaceChildren(Object.assign(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }),
      { textContent: "no positions yet" }));
    return;
  }
  // An equirectangular projection around the fleet's centroid, in metres.
  const centre = withPos.length ? withPos.map((m) => [m.state.position.lat, m.state.position.lon]) : extra;
  const lat0 = centre.reduce((a, p) => a + p[0], 0) / centre.length;
  const lon0 = centre.reduce((a, p) => a + p[1], 0) / centre.length;
  const kx = 111320 * Math.cos((lat0 * Math.PI) / 180), ky = 110540;
  const project = ([lat, lon]) => [(lon - lon0) * kx, (lat - lat0) * ky];
  const sel = state.selected && state.mowers.get(state.selected);
  const follow = $("map-follow").checked && sel && sel.state && sel.state.position;
  const framed = follow ? [sel] : withPos;
  const pts = framed.flatMap((m) => [...m.track, [m.state.position.lat, m.state.position.lon]].map(project));
  if (!follow) pts.push(...extra.map(project));
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const [x, y] of pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
  const minSpan = follow ? 40 : 100;
  const span = Math.max(x1 - x0, ((y1 - y0) * (W - 2 * PAD)) / (H - 2 * PAD), minSpan);
  const cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
  const scale = (W - 2 * PAD) / span;
  const toScreen = ([x, y]) => [W / 2 + (x - cx) * scale, H / 2 - (y - cy) * scale];
  $("map-scale").textContent = `${Math.round(span)} m across`;

  const nodes = hooks.mapLayers.flatMap((layer) => layer(project, toScreen));
  for (const m of withPos) {
    const colour = ACTIVITY_COLOUR[m.state.activity] || "#555";
    if (m.track.length > 1) {
      const d = m.track.map(project).map(toScreen).map(([x, y], i) => `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join("");
      nodes.push(svg("path", { d, class: "track", stroke: colour }));
    }
  }
  for (const m of withPos) {
    const [x, y] = toScreen(project([m.state.position.lat, m.state.position.lon]));
    if (x < -20 || x > W + 20 || y < -20 || y > H + 20) continue;
    const dot = svg("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: m.id === state.selected ? 9 : 7,
      fill: ACTIVITY_COLOUR[m.state.activity] || "#555",
      class: `mower${m.id === state.selected ? " selected" : ""}`, "data-mower": m.id,
      "data-lat": m.state.position.lat, "data-lon": m.state.position.lon });
    dot.addEventListener("click", () => select(m.id));
    const title = svg("title");
    title.textContent = `${m.name}: ${m.state.activity}, ${Math.round(m.state.battery)} %`;
    dot.append(title);
    nodes.push(dot);
    const label = svg("text", { x: (x + 11).toFixed(1), y: (y + 4).toFixed(1) });
    label.textContent = m.name;
    nodes.push(label);
  }
  map.replaceChildren(...nodes);
}

function renderDetailHead() {
  const m = state.selected && state.mowers.get(state.selected);
  $("stop-selected").disabled = !m;
  if (!m) return;
  $("detail-name").textContent = m.name;
  $("detail-brand").textContent = mowerBrandLine(m);
  const s = m.state;
  $("detail-state").textContent = s
    ? `${s.activity} · ${Math.round(s.battery)} % · RTK ${s.rtk_fix} · blade ${s.blade_height_mm ?? "?"} mm · ${s.speed_mps ?? "?"} m/s`
    : "no state yet";
}

function renderTimeline() {
  const list = [...state.commands.values()].filter((c) => c.mower_id === state.selected);
  const first = (c) => (c.statuses[0] ? c.statuses[0].at : "");
  list.sort((a, b) => (first(a) < first(b) ? 1 : -1));
  $("timeline").replaceChildren(...list.slice(0, 50).map((c) => {
    const steps = c.statuses.filter((s) => s.status !== "issued");
    const li = el("li", { "data-command": c.id, "data-kind": c.kind || "" },
      el("strong", {}, c.kind || "command"), " · ",
      new Date(first(c)).toLocaleTimeString(), " ");
    if (!steps.length) li.append(el("span", { class: "muted" }, "sent"));
    steps.forEach((s, i) => {
      if (i) li.append(" → ");
      li.append(el("span", { class: `st st-${s.status}`, title: s.reason || "" },
        s.status + (s.reason ? ` (${s.reason})` : "")));
    });
    return li;
  }));
}

function renderChart(items) {
  const chart = $("chart");
  const W = 600, H = 140;
  if (!items.length) {
    chart.replaceChildren(Object.assign(svg("text", { x: 10, y: 20 }), { textContent: "no history yet" }));
    return;
  }
  const t = items.map((i) => Date.parse(i.bin || i.observed_at));
  const t0 = Math.min(...t), t1 = Math.max(...t, t0 + 1);
  const x = (v) => ((v - t0) / (t1 - t0)) * (W - 20) + 10;
  const y = (b) => H - 10 - (b / 100) * (H - 20);
  const line = items.map((i, k) => `${k ? "L" : "M"}${x(t[k]).toFixed(1)},${y(i.battery).toFixed(1)}`).join("");
  const band = items.map((i, k) => `${k ? "L" : "M"}${x(t[k]).toFixed(1)},${y(i.battery_max ?? i.battery).toFixed(1)}`).join("")
    + items.slice().reverse().map((i, k) => `L${x(t[items.length - 1 - k]).toFixed(1)},${y(i.battery_min ?? i.battery).toFixed(1)}`).join("") + "Z";
  const nodes = [50, 100].map((b) => svg("line", { x1: 10, x2: W - 10, y1: y(b), y2: y(b), stroke: "#dfe5dc" }));
  nodes.push(svg("path", { d: band, fill: "#2e7d32", "fill-opacity": 0.15 }));
  nodes.push(svg("path", { d: line, fill: "none", stroke: "#2e7d32", "stroke-width": 2 }));
  if (items.length < 8) {
    items.forEach((i, k) => nodes.push(svg("circle", { cx: x(t[k]), cy: y(i.battery), r: 3, fill: "#2e7d32" })));
  }
  const last = items[items.length - 1];
  nodes.push(Object.assign(svg("text", { x: W - 12, y: 14, "text-anchor": "end", "font-size": 11 }),
    { textContent: `${last.battery} %` }));
  chart.replaceChildren(...nodes);
}

// --- the audit trail (account admins) -----------------------------------------------------

// Two trails: Fleet's commands, and Notifications' alarm changes (who acknowledged and
// assigned what); the same filters, the kind filter naming a command kind or a change.
const AUDIT_KINDS = {
  commands: ["start_mow", "pause_mow", "resume_mow", "return_to_dock", "emergency_stop",
    "set_blade_height", "set_speed", "manual_drive"],
  alarms: ["raised", "updated", "cleared", "acknowledged", "assigned"],
};

const auditTrail = () => $("audit-trail").value;

function auditSource() {
  return auditTrail() === "alarms"
    ? { base: state.config.notifications_url, path: "/v1/alarms/audit", filter: "change" }
    : { base: state.config.fleet_url, path: "/v1/audit", filter: "kind" };
}

function auditKinds() {
  $("audit-kind").replaceChildren(el("option", { value: "" }, "every kind"),
    ...AUDIT_KINDS[auditTrail()].map((k) => el("option", { value: k }, k)));
}

function auditQuery() {
  const params = new URLSearchParams();
  if ($("audit-mower").value) params.set("mower", $("audit-mower").value);
  if ($("audit-kind").value) params.set(auditSource().filter, $("audit-kind").value);
  if ($("audit-from").value) params.set("from", new Date(`${$("audit-from").value}T00:00:00`).toISOString());
  if ($("audit-to").value) params.set("to", new Date(`${$("audit-to").value}T23:59:59.999`).toISOString());
  return params;
}

function openAudit() {
  $("audit-mower").replaceChildren(el("option", { value: "" }, "every mower"),
    ...sortedMowers().map((m) => el("option", { value: m.id }, m.name)));
  $("audit").hidden = false;
  quietly(loadAudit(false));
}

// One page of the trail; ``more`` appends the page after the last one shown.
async function loadAudit(more) {
  const params = auditQuery();
  params.set("limit", "50");
  if (more && state.auditAfter) params.set("after", state.auditAfter);
  let page;
  const source = auditSource();
  try {
    page = await api(source.base, `${source.path}?${params}`);
  } catch (err) {
    $("audit-error").textContent = err.status === 403 ? "The audit trail is for the account's admins." : err.message;
    return;
  }
  $("audit-error").textContent = "";
  const rows = auditTrail() === "alarms" ? page.items.map(alarmAuditRow) : page.commands.map((c) => {
    const last = c.statuses.length ? c.statuses[c.statuses.length - 1] : null;
    return el("tr", { "data-command": c.command_id },
      el("td", {}, new Date(c.issued_at).toLocaleString()),
      el("td", {}, state.mowers.get(c.mower_id)?.name || c.mower_id),
      el("td", {}, c.kind), el("td", {}, c.issued_by),
      el("td", { class: last ? `st-${last.status}` : "" }, last ? last.status : "—"));
  });
  if (more) $("audit-table").tBodies[0].append(...rows);
  else $("audit-table").tBodies[0].replaceChildren(...rows);
  state.auditAfter = page.has_more ? page.next_after : null;
  $("audit-more").hidden = !page.has_more;
}

function alarmAuditRow(line) {
  const what = line.change === "assigned" ? `assigned to ${line.assignee || "nobody"}` : line.change;
  return el("tr", { "data-alarm": line.alarm_id, "data-change": line.change },
    el("td", {}, new Date(line.at).toLocaleString()),
    el("td", {}, state.mowers.get(line.mower_id)?.name || line.mower_id),
    el("td", {}, `${line.condition}: ${what}`), el("td", {}, line.by || "rules"),
    el("td", { class: `sev-${line.severity}` }, line.comment || line.severity));
}

// The whole selection as JSON lines, saved as a file (the API wants the bearer token, so
// the page fetches it and hands the browser the result).
async function exportAudit() {
  const source = auditSource();
  const response = await fetch(`${source.base}${source.path}/export?${auditQuery()}`, {
    headers: { Authorization: `Bearer ${state.token}` },
  });
  if (!response.ok) {
    $("audit-error").textContent = `export refused: ${response.status}`;
    return;
  }
  const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `mowdeck-audit-${auditTrail()}.ndjson` });
  document.body.append(link);
  link.click();
  link.remove();
}

// --- registering, renaming and removing mowers ---------------------------------------------

async function registerMower() {
  let options;
  try {
    options = JSON.parse($("register-options").value || "{}");
  } catch (err) {
    $("register-error").textContent = "the options are not JSON";
    return;
  }
  const body = { name: $("register-name").value.trim(), connection: { kind: $("register-kind").value, options } };
  try {
    const made = await fleet("/v1/mowers", { method: "POST", json: body });
    mower(made.mower_id).name = made.name;
    $("register-form").hidden = true;
    $("register-error").textContent = "";
    scheduleRender();
    toast("Mower registered", made.name, "info", "console");
  } catch (err) {
    $("register-error").textContent = err.message;
  }
}

async function renameMower() {
  const id = state.selected;
  const name = $("rename").value.trim();
  if (!id || !name) return;
  try {
    const changed = await fleet(`/v1/mowers/${id}`, { method: "PATCH", json: { name } });
    mower(id).name = changed.name;
    scheduleRender();
  } catch (err) {
    $("command-error").textContent = err.message;
  }
}

async function removeMower() {
  const id = state.selected;
  if (!id || !confirm(`Remove ${mower(id).name}? Its history goes with it.`)) return;
  try {
    await fleet(`/v1/mowers/${id}`, { method: "DELETE" });
    state.mowers.delete(id);
    state.selected = null;
    $("detail-body").hidden = true;
    $("detail-name").textContent = "Select a mower";
    scheduleRender();
  } catch (err) {
    $("command-error").textContent = err.message;
  }
}

// --- the selected mower ------------------------------------------------------------------

async function select(id) {
  state.selected = id;
  $("detail-body").hidden = false;
  $("command-error").textContent = "";
  scheduleRender();
  renderTimeline();
  $("rename").value = mower(id).name || "";
  for (const selected of hooks.select) selected(id);
  const more = typeof scheduleSelect === "function" ? [scheduleSelect(id)] : []; // schedules.js
  await Promise.allSettled([loadTimeline(id), loadHistory(id), loadTrack(id), loadMowerAlarms(id), ...more]);
}

// The selected mower's alarms: the open ones and the latest cleared, newest first.
async function loadMowerAlarms(id) {
  if (!state.config.notifications_url) return;
  const [open, cleared] = await Promise.all([
    notifications(`/v1/alarms?mower=${id}&limit=20`),
    notifications(`/v1/alarms?mower=${id}&state=cleared&limit=20`),
  ]);
  if (id !== state.selected) return;
  $("mower-alarms").replaceChildren(...[...open.items, ...cleared.items].map((a) => el("li",
    { class: `sev-${a.severity} alarm-${a.state}`, "data-alarm": a.id },
    el("strong", {}, a.code ? `${a.kind} (error ${errorLabel(a.code)})` : a.kind), " · ",
    el("span", { class: "muted" }, a.state === "cleared"
      ? `${new Date(a.first_at).toLocaleString()} – ${new Date(a.cleared_at).toLocaleTimeString()}`
      : `${a.state} since ${age(a.first_at)}`),
    a.acknowledged_by ? ` · acknowledged by ${a.acknowledged_by}` : "")));
}

async function loadTimeline(id) {
  const from = new Date(Date.now() - 24 * 3600 * 1000).toISOString();
  const data = await telemetry(`/v1/mowers/${id}/commands?from=${encodeURIComponent(from)}`);
  for (const row of data.items) applyResult(row);
  renderTimeline();
}

async function loadHistory(id) {
  const from = new Date(Date.now() - 3600 * 1000).toISOString();
  const data = await telemetry(`/v1/mowers/${id}/history?step=1m&from=${encodeURIComponent(from)}`);
  if (id === state.selected) renderChart(data.items);
}

async function loadTrack(id) {
  const from = new Date(Date.now() - 15 * 60 * 1000).toISOString();
  const data = await telemetry(`/v1/mowers/${id}/track?from=${encodeURIComponent(from)}`);
  const m = mower(id);
  const older = data.items.map((p) => [p.lat, p.lon]);
  if (older.length) m.track = [...older, ...m.track].slice(-TRACK_POINTS);
  scheduleRender();
}

// --- notifications -----------------------------------------------------------------------

function toast(title, body, severity, kind = "notification") {
  const node = el("div", { class: `toast toast-${kind} sev-${severity || "info"}`, role: "status" },
    el("strong", {}, title), body);
  $("toasts").append(node);
  setTimeout(() => node.remove(), 8000);
}

async function loadInbox() {
  if (!state.config.notifications_url) {
    $("inbox").replaceChildren(el("li", { class: "muted" }, "Notifications are not configured."));
    return;
  }
  const data = await notifications("/v1/notifications/inbox?limit=20");
  $("unread").textContent = `${data.unread ?? 0} ${t("unread")}`;
  $("inbox").replaceChildren(...data.items.map((n) => el("li", { class: n.read ? "" : "unread" },
    el("span", { class: `sev-${n.severity}` }, n.title || n.kind), " · ",
    el("span", { class: "muted" }, new Date(n.occurred_at).toLocaleTimeString()),
    el("div", {}, n.body || ""))));
  // Without the live stream, new inbox items are what tells of a notification.
  if (state.mode !== "live") {
    const ids = new Set(data.items.map((n) => n.id));
    if (state.inboxSeen) {
      for (const n of data.items) if (!state.inboxSeen.has(n.id) && !n.read) toast(n.title || n.kind, n.body || "", n.severity);
    }
    state.inboxSeen = ids;
  }
}

// --- alarms ------------------------------------------------------------------------------

// Who the token says the caller is (the JWT's subject), for "assign to me".
function me() {
  try {
    const payload = state.token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload)).sub || null;
  } catch (err) {
    return null;
  }
}

async function loadAlarms() {
  if (!state.config.notifications_url) {
    $("alarms").replaceChildren(el("li", { class: "muted" }, "Alarms are not configured."));
    return;
  }
  const data = await notifications("/v1/alarms?limit=50");
  state.alarms = new Map(data.items.map((a) => [a.id, a]));
  renderAlarms();
}

// An alarm event of the stream: the alarm as it is now (a cleared one leaves the panel).
function applyAlarm(data) {
  const alarm = { ...(state.alarms.get(data.alarm_id) || {}), ...data, id: data.alarm_id };
  if (alarm.state === "cleared") state.alarms.delete(alarm.id);
  else state.alarms.set(alarm.id, alarm);
  renderAlarms();
  if (data.change === "raised") toast(alarmTitle(alarm), t("alarm raised"), alarm.severity, "alarm");
}

function alarmTitle(a) {
  const name = state.mowers.get(a.mower_id)?.name || a.mower_id;
  const what = a.code ? `${a.kind} (error ${errorLabel(a.code)})` : a.kind;
  return `${name}: ${what}`;
}

function renderAlarms() {
  const items = [...state.alarms.values()].sort((a, b) => Date.parse(b.latest_at) - Date.parse(a.latest_at));
  $("alarm-count").textContent = `${items.length} ${t("open")}`;
  $("alarms").replaceChildren(...items.map((a) => {
    const comment = el("input", { type: "text", placeholder: t("comment"), "data-comment": a.id });
    const acked = a.acknowledged_by ? ` · ${t("acknowledged by")} ${a.acknowledged_by}` : "";
    const assigned = a.assignee ? ` · ${t("assigned to")} ${a.assignee}` : "";
    const li = el("li", { class: `sev-${a.severity} alarm-${a.state}`, "data-alarm": a.id },
      el("strong", {}, alarmTitle(a)), " · ",
      el("span", { class: "muted" }, `${age(a.first_at)} ${t("ago")}, ${a.count || 1}×${acked}${assigned}`));
    if (a.state === "active") {
      li.append(comment, el("button", { onclick: () => quietly(acknowledge(a.id, comment.value)), "data-action": "acknowledge" }, t("Acknowledge")));
    }
    if (me() && a.assignee !== me()) {
      li.append(el("button", { onclick: () => quietly(assign(a.id, me())), "data-action": "assign" }, t("Assign to me")));
    }
    return li;
  }));
}

async function acknowledge(id, comment) {
  const body = comment ? { comment } : {};
  const alarm = await notifications(`/v1/alarms/${id}/acknowledge`, { method: "POST", json: body });
  state.alarms.set(alarm.id, alarm);
  renderAlarms();
}

// ?mower=&action=acknowledge|dock&kind= from a push notification's action (sw.js): done
// once, then taken out of the address so that a reload does not do it again.
async function pushIntent() {
  const params = new URLSearchParams(location.search);
  const mowerId = params.get("mower");
  const action = params.get("action");
  if (!mowerId || !action) return;
  params.delete("action");
  params.delete("kind");
  const kind = new URLSearchParams(location.search).get("kind");
  history.replaceState(null, "", `${location.pathname}?${params}`);
  const name = state.mowers.get(mowerId)?.name || mowerId;
  if (action === "dock") {
    await send(mowerId, { kind: "return_to_dock" });
    toast("Sent home", name, "info", "console");
  } else if (action === "acknowledge") {
    const page = await notifications(`/v1/alarms?state=active&mower=${encodeURIComponent(mowerId)}`);
    const open = page.items.filter((a) => !kind || a.kind === kind);
    for (const alarm of open) await acknowledge(alarm.id, "");
    toast("Acknowledged", `${name}: ${open.length} alarm(s)`, "info", "console");
  }
}

async function assign(id, assignee) {
  const alarm = await notifications(`/v1/alarms/${id}/assign`, { method: "POST", json: { assignee } });
  state.alarms.set(alarm.id, alarm);
  renderAlarms();
}

// --- notification settings ---------------------------------------------------------------

function browserZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (err) { return "UTC"; }
}

async function loadPreferences() {
  if (!state.config.notifications_url) return;
  state.preferences = await notifications("/v1/notifications/preferences");
  state.locale = state.preferences.locale || "en";
  translatePage();
  $("open-settings").hidden = false;
  // Nobody is notified until they subscribe (ADR 0022): offer it on first use.
  $("first-run").hidden = state.preferences.scope !== "none";
}

async function savePreferences(doc) {
  state.preferences = await notifications("/v1/notifications/preferences", { method: "PUT", json: doc });
  state.locale = state.preferences.locale || "en";
  translatePage();
  renderAlarms();
  $("first-run").hidden = state.preferences.scope !== "none";
}

async function subscribeAll() {
  await savePreferences({ ...(state.preferences || {}), scope: "all", timezone: state.preferences?.timezone !== "UTC" ? state.preferences.timezone : browserZone() });
  toast("Subscribed", "You hear about all your mowers now.", "info", "console");
}

function openSettings() {
  const p = state.preferences || { scope: "none", kinds: {}, locale: "en", timezone: "UTC" };
  document.querySelectorAll('#settings-form input[name="scope"]').forEach((r) => { r.checked = r.value === p.scope; });
  const chosen = new Set(p.mowers || []);
  $("settings-mowers").replaceChildren(...sortedMowers().map((m) => el("label", {},
    el("input", { type: "checkbox", value: m.id, checked: chosen.has(m.id), "data-mower": m.id }), ` ${m.name}`)));
  $("settings-kinds").replaceChildren(...Object.entries(p.kinds || {}).map(([kind, on]) => el("label", {},
    el("input", { type: "checkbox", value: kind, checked: on, "data-kind-choice": kind }), ` ${kind}`)));
  $("quiet-on").checked = Boolean(p.quiet_hours);
  if (p.quiet_hours) {
    $("quiet-start").value = p.quiet_hours.start;
    $("quiet-end").value = p.quiet_hours.end;
    $("quiet-critical").checked = p.quiet_hours.allow_critical !== false;
  }
  $("settings-timezone").value = p.timezone && p.timezone !== "UTC" ? p.timezone : browserZone();
  $("settings-locale").value = p.locale || "en";
  $("settings-error").textContent = "";
  $("settings").hidden = false;
  quietly(loadTargets());
}

// This user's channel targets, each with a way to remove it.
async function loadTargets() {
  const data = await notifications("/v1/notifications/targets");
  let mine = null;
  try {
    const sub = state.worker && await state.worker.pushManager.getSubscription();
    mine = sub ? sub.endpoint : null;
  } catch (err) { mine = null; }
  $("settings-targets").replaceChildren(...data.items.map((t) => {
    const what = t.channel === "webpush"
      ? (t.subscription && t.subscription.endpoint === mine ? "push: this device" : "push: a browser")
      : `${t.channel}: ${t.server || ""}/${t.topic || ""}`;
    const remove = el("button", { type: "button", "data-remove": t.id, onclick: () => quietly(removeTarget(t.id)) },
      t.channel === "webpush" && t.subscription && t.subscription.endpoint === mine ? "Remove this device" : "Remove");
    return el("li", { "data-target": t.id }, what, " ", remove);
  }));
}

async function removeTarget(id) {
  await notifications(`/v1/notifications/targets/${id}`, { method: "DELETE" });
  await loadTargets();
}

async function addNtfy() {
  const server = $("ntfy-server").value.trim() || "https://ntfy.sh";
  const topic = $("ntfy-topic").value.trim();
  try {
    await notifications("/v1/notifications/targets", { method: "POST", json: { channel: "ntfy", server, topic } });
    $("ntfy-topic").value = "";
    await loadTargets();
  } catch (err) {
    $("settings-error").textContent = err.message;
  }
}

async function submitSettings() {
  const scope = document.querySelector('#settings-form input[name="scope"]:checked')?.value || "none";
  const kinds = {};
  document.querySelectorAll("#settings-kinds input").forEach((c) => { kinds[c.value] = c.checked; });
  const doc = {
    scope,
    mowers: scope === "selected" ? [...document.querySelectorAll("#settings-mowers input:checked")].map((c) => c.value) : [],
    kinds,
    timezone: $("settings-timezone").value.trim() || "UTC",
    locale: $("settings-locale").value,
  };
  if ($("quiet-on").checked) {
    doc.quiet_hours = { start: $("quiet-start").value, end: $("quiet-end").value, allow_critical: $("quiet-critical").checked };
  }
  try {
    await savePreferences(doc);
    $("settings").hidden = true;
    toast("Settings saved", "", "info", "console");
  } catch (err) {
    $("settings-error").textContent = err.message;
  }
}

// --- Web Push on this device ------------------------------------------------------------

async function registerWorker() {
  if (!("serviceWorker" in navigator) || !state.config.notifications_url) return;
  state.worker = await navigator.serviceWorker.register("/sw.js");
  $("enable-push").hidden = !("PushManager" in window);
}

function keyBytes(base64url) {
  const text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (base64url.length % 4)) % 4));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

// Asks the browser's permission, subscribes with Notifications' VAPID key and registers
// the subscription as this user's webpush target.
async function enablePush() {
  if ((await Notification.requestPermission()) !== "granted") {
    toast("Push not enabled", "The browser's permission was not given.", "warning", "console");
    return;
  }
  const { public_key: key } = await notifications("/v1/notifications/webpush/vapid-public-key");
  const registration = await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
  const { endpoint, keys } = subscription.toJSON();
  await notifications("/v1/notifications/targets", { method: "POST", json: { channel: "webpush", subscription: { endpoint, keys } } });
  toast("Push enabled", "This device shows your notifications now.", "info", "console");
}

// --- start -------------------------------------------------------------------------------

function quietly(promise) {
  promise.catch((err) => {
    if (!(err instanceof ApiError && err.status === 401)) console.warn(err.message || err);
  });
}

function every(ms, fn) {
  state.timers.push(setInterval(() => { if (state.token) quietly(fn()); }, ms));
}

function wire() {
  document.querySelectorAll("[data-kind]").forEach((button) => {
    if (button.tagName === "BUTTON") button.onclick = () => command({ kind: button.dataset.kind });
  });
  $("blade-form").onsubmit = (e) => { e.preventDefault(); command({ kind: "set_blade_height", height_mm: Number($("blade").value) }); };
  $("speed-form").onsubmit = (e) => { e.preventDefault(); command({ kind: "set_speed", speed_mps: Number($("speed").value) }); };
  $("stop-selected").onclick = () => command({ kind: "emergency_stop", reason: "console" });
  $("stop-all").onclick = () => quietly(stopAll());
  $("map-follow").onchange = scheduleRender;
  $("enable-push").onclick = () => enablePush().catch((err) => toast("Push not enabled", err.message || String(err), "warning", "console"));
  $("open-settings").onclick = openSettings;
  $("first-run-settings").onclick = openSettings;
  $("close-settings").onclick = () => { $("settings").hidden = true; };
  $("add-ntfy").onclick = () => quietly(addNtfy());
  $("open-audit").onclick = openAudit;
  $("close-audit").onclick = () => { $("audit").hidden = true; };
  $("audit-form").onsubmit = (e) => { e.preventDefault(); quietly(loadAudit(false)); };
  $("audit-more").onclick = () => quietly(loadAudit(true));
  $("audit-trail").onchange = () => { auditKinds(); quietly(loadAudit(false)); };
  $("audit-export").onclick = () => quietly(exportAudit());
  $("open-register").onclick = () => { $("register-form").hidden = false; $("register-name").focus(); };
  $("close-register").onclick = () => { $("register-form").hidden = true; };
  $("register-form").onsubmit = (e) => { e.preventDefault(); quietly(registerMower()); };
  $("rename-form").onsubmit = (e) => { e.preventDefault(); quietly(renameMower()); };
  $("remove-mower").onclick = () => quietly(removeMower());
  $("subscribe-all").onclick = () => quietly(subscribeAll());
  $("settings-form").onsubmit = (e) => { e.preventDefault(); quietly(submitSettings()); };
  $("signin-form").onsubmit = (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("signin-token").value.trim());
    start();
  };
}

async function start() {
  state.token = sessionStorage.getItem(TOKEN_KEY);
  if (!state.token) { signOut($("signin-error").textContent); return; }
  $("signin").hidden = true;
  $("console").hidden = false;
  try {
    await loadMowers();
    await loadStates();
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) $("detail-state").textContent = `cannot load the fleet: ${err.message}`;
    return;
  }
  for (const begin of hooks.start) quietly(begin());
  quietly(loadInbox());
  quietly(loadAlarms());
  quietly(loadPreferences());
  quietly(registerWorker());
  // A notification clicked on this device opens the console on its mower, and an action
  // chosen on it (acknowledge, dock) is done here, where the token is.
  const asked = new URLSearchParams(location.search).get("mower");
  if (asked && state.mowers.has(asked)) quietly(select(asked));
  quietly(pushIntent());
  connectStream();
  // Polling carries the page where no stream does; with one it refreshes what the stream
  // does not carry (staleness ages, the chart).
  every(POLL_MS, async () => { if (state.mode !== "live") await loadStates(); else scheduleRender(); });
  every(POLL_MS, async () => { if (state.mode !== "live" && state.selected) await loadTimeline(state.selected); });
  every(5000, async () => { if (state.mode !== "live") await loadInbox(); });
  every(5000, async () => { if (state.mode !== "live") await loadAlarms(); else renderAlarms(); });
  every(10000, async () => { if (state.selected) await loadHistory(state.selected); });
  every(60000, loadMowers);
}

// For the console's other scripts: what they need of this one.
window.mowdeck = { state, hooks, $, el, svg, t, fleet, allPages, quietly, scheduleRender, select, toast };

async function main() {
  wire();
  state.config = await (await fetch("/console/config.json")).json();
  await signIn();
  await start();
}

main();
