"use strict";
// The selected mower's schedule: its week as a calendar, its next start and what holds it
// back, park and resume, and its site's restrictions. Loaded after app.js, whose helpers
// ($, el, fleet, quietly, state, ApiError) it uses; app.js calls scheduleSelect(id).

const WEEK = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const DAY_NAMES = { mon: "Mon", tue: "Tue", wed: "Wed", thu: "Thu", fri: "Fri", sat: "Sat", sun: "Sun" };
const REASONS = ["rain", "frost", "event"];
const schedules = { view: null, restrictions: [] };

function scheduleText(key) {
  return typeof t === "function" ? t(key) : key;
}

function localDay(iso, zone) {
  const short = new Intl.DateTimeFormat("en-GB", { weekday: "short", timeZone: zone }).format(new Date(iso));
  return short.slice(0, 3).toLowerCase();
}

function localTime(iso, zone) {
  return new Intl.DateTimeFormat("en-GB", {
    weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", timeZone: zone,
  }).format(new Date(iso));
}

function taskEnd(task) {
  const [h, m] = task.start.split(":").map(Number);
  const end = h * 60 + m + task.duration_minutes;
  const hh = String(Math.floor(end / 60) % 24).padStart(2, "0");
  const mm = String(end % 60).padStart(2, "0");
  return `${hh}:${mm}${end >= 1440 ? " +1" : ""}`;
}

function schedulePanel() {
  let panel = $("schedule-panel");
  if (!panel) {
    panel = el("div", { id: "schedule-panel", class: "schedule" });
    $("detail-body").insertBefore(panel, $("command-error").nextSibling);
  }
  return panel;
}

function renderWeek(view) {
  const nextDay = view.next_start ? localDay(view.next_start, view.timezone) : null;
  const head = el("tr", {}, ...WEEK.map((d) => el("th", { "data-day": d, class: d === nextDay ? "next" : "" }, DAY_NAMES[d])));
  const cells = WEEK.map((d) => {
    const blocks = view.tasks
      .filter((task) => task.days.includes(d))
      .sort((a, b) => a.start.localeCompare(b.start))
      .map((task) => el("div", { class: "slot", "data-start": task.start },
        `${task.start}–${taskEnd(task)}`, task.work_area ? el("span", { class: "muted" }, ` ${task.work_area}`) : ""));
    return el("td", { "data-day": d, class: d === nextDay ? "next" : "" }, ...blocks);
  });
  return el("table", { id: "schedule-week", class: "week" }, el("thead", {}, head), el("tbody", {}, el("tr", {}, ...cells)));
}

function restrictedText(view) {
  const r = view.restricted;
  if (!r) return "";
  const why = { park_until_next_schedule: "parked until the next start", park_until_further_notice: "parked until further notice", disabled: "schedule disabled" }[r.reason] || r.reason;
  return r.until ? `Not mowing: ${why} until ${localTime(r.until, view.timezone)}` : `Not mowing: ${why}`;
}

function renderSchedule() {
  const panel = schedulePanel();
  const view = schedules.view;
  // How often the panel was drawn: a redraw replaces its forms (the tests wait for it).
  panel.dataset.renders = String(Number(panel.dataset.renders || 0) + 1);
  panel.replaceChildren(el("h3", {}, scheduleText("Schedule")));
  if (!view) {
    panel.append(el("p", { id: "schedule-status", class: "muted" }, scheduleText("No schedule")));
    return;
  }
  const next = view.next_start ? `Next start: ${localTime(view.next_start, view.timezone)}` : "No start ahead";
  panel.append(
    el("p", { id: "schedule-status" }, el("span", { id: "schedule-next" }, next), " ",
      el("span", { class: "muted" }, `(${view.timezone})`)),
    el("p", { id: "schedule-restricted", class: view.restricted ? "warning" : "" }, restrictedText(view)),
    renderWeek(view),
    el("div", { class: "commands" },
      overrideButton("park-next", "Park until next start", "park_until_next_schedule"),
      overrideButton("park-further", "Park until further notice", "park_until_further_notice"),
      overrideButton("resume-schedule", "Resume schedule", "resume_schedule")),
  );
  if (view.site_id) panel.append(renderRestrictions(view));
  panel.append(el("p", { id: "schedule-error", class: "error" }));
}

function overrideButton(id, label, override, site) {
  const button = el("button", { id, type: "button" }, scheduleText(label));
  button.onclick = () => quietly(sendOverride(override, site));
  return button;
}

function renderRestrictions(view) {
  const list = el("ol", { id: "site-restrictions", class: "restrictions" }, ...schedules.restrictions.map((r) => {
    const lift = el("button", { type: "button", class: "plain", "data-restriction": r.restriction_id }, scheduleText("Lift"));
    lift.onclick = () => quietly(liftRestriction(view.site_id, r.restriction_id));
    return el("li", { "data-restriction": r.restriction_id }, `${r.reason} until ${localTime(r.until, view.timezone)} `, lift);
  }));
  const reason = el("select", { id: "restriction-reason" }, ...REASONS.map((r) => el("option", { value: r }, r)), el("option", { value: "" }, "other…"));
  const other = el("input", { id: "restriction-other", type: "text", maxLength: 200, placeholder: "reason" });
  const until = el("input", { id: "restriction-until", type: "datetime-local", required: true });
  const form = el("form", { id: "restriction-form", class: "inline" },
    el("label", {}, "Restrict the site: ", reason), other, el("label", {}, " until ", until),
    el("button", { type: "submit" }, scheduleText("Restrict")));
  form.onsubmit = (e) => {
    e.preventDefault();
    quietly(addRestriction(view.site_id, reason.value || other.value.trim(), until.value));
  };
  return el("div", { id: "site-schedule" },
    el("h4", {}, scheduleText("Site")),
    el("div", { class: "commands" },
      overrideButton("park-site", "Park the site", "park_until_further_notice", view.site_id),
      overrideButton("resume-site", "Resume the site", "resume_schedule", view.site_id)),
    list, form);
}

function scheduleError(err) {
  const node = $("schedule-error");
  if (node) node.textContent = err.message || String(err);
}

async function loadSchedule(id) {
  try {
    const view = await fleet(`/v1/mowers/${id}/schedule`);
    // A mower never given a schedule has an empty one.
    schedules.view = view.tasks.length || view.enabled ? view : null;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
    schedules.view = null;
  }
  schedules.restrictions = [];
  if (schedules.view && schedules.view.site_id) {
    const listed = await fleet(`/v1/sites/${schedules.view.site_id}/restrictions`);
    schedules.restrictions = listed.restrictions;
  }
  if (state.selected === id) renderSchedule();
}

async function sendOverride(override, site) {
  const id = state.selected;
  const path = site ? `/v1/sites/${site}/schedule/override` : `/v1/mowers/${id}/schedule/override`;
  try {
    await fleet(path, { method: "POST", json: { override } });
  } catch (err) {
    scheduleError(err);
    return;
  }
  await loadSchedule(id);
}

async function addRestriction(site, reason, until) {
  if (!reason || !until) { scheduleError(new Error("a reason and an end are needed")); return; }
  try {
    await fleet(`/v1/sites/${site}/restrictions`, { method: "POST", json: { reason, until: new Date(until).toISOString() } });
  } catch (err) {
    scheduleError(err);
    return;
  }
  await loadSchedule(state.selected);
}

async function liftRestriction(site, restriction) {
  try {
    await fleet(`/v1/sites/${site}/restrictions/${restriction}`, { method: "DELETE" });
  } catch (err) {
    scheduleError(err);
    return;
  }
  await loadSchedule(state.selected);
}

// Called by app.js when a mower is selected.
async function scheduleSelect(id) {
  schedules.view = null;
  schedules.restrictions = [];
  await loadSchedule(id);
}
