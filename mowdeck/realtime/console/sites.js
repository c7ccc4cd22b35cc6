// Sites in the console: the fleet list grouped by site with a site filter, the selected
// site's areas on the garden map (work areas filled, stay-out zones hatched red), and a
// mower's site in its detail. Loaded after app.js, through its hooks (window.mowdeck).
"use strict";

(() => {
  const { state, hooks, $, el, svg, t, fleet, allPages, quietly, scheduleRender } = window.mowdeck;
  const NO_SITE = "none";
  const sites = new Map(); // site_id -> {site_id, name, timezone, location, areas}
  let filter = ""; // "": every site; NO_SITE: mowers without a site; else a site id

  // --- the filter and the detail's site, put into the page ---------------------------

  const select = el("select", { id: "site-filter", title: "show the mowers of one site" });
  const label = el("label", { class: "muted" }, "Site ", select);
  const head = document.querySelector(".list-panel .panel-head");
  head.insertBefore(label, $("open-register"));
  select.onchange = () => { filter = select.value; quietly(showSite(filter)); };

  const siteOf = el("select", { id: "mower-site" });
  const siteForm = el("form", { id: "site-form", class: "inline" },
    el("label", {}, "Site ", siteOf), el("button", { type: "submit" }, "Move"));
  $("rename-form").after(siteForm);
  siteForm.onsubmit = (e) => { e.preventDefault(); quietly(moveMower()); };

  function options(target, first) {
    const named = [...sites.values()].sort((a, b) => a.name.localeCompare(b.name));
    target.replaceChildren(...first.map(([value, text]) => el("option", { value }, text)),
      ...named.map((s) => el("option", { value: s.site_id }, s.name)));
  }

  function renderOptions() {
    options(select, [["", t("every site")], [NO_SITE, t("no site")]]);
    select.value = filter === "" || filter === NO_SITE || sites.has(filter) ? filter : "";
    options(siteOf, [["", t("no site")]]);
    renderDetailSite();
  }

  function renderDetailSite() {
    const m = state.selected && state.mowers.get(state.selected);
    siteOf.value = (m && m.site && sites.has(m.site)) ? m.site : "";
  }

  // --- loading ---------------------------------------------------------------------------

  async function loadSites() {
    const seen = new Set();
    for (const view of await allPages(fleet, "/v1/sites?limit=1000", "sites")) {
      seen.add(view.site_id);
      sites.set(view.site_id, { ...(sites.get(view.site_id) || { areas: null }), ...view });
    }
    for (const id of [...sites.keys()]) if (!seen.has(id)) sites.delete(id);
    if (filter !== "" && filter !== NO_SITE && !sites.has(filter)) filter = "";
    renderOptions();
    if (sites.has(filter)) await loadAreas(filter);
    scheduleRender();
  }

  async function loadAreas(id) {
    const areas = await fleet(`/v1/sites/${id}/areas`);
    const site = sites.get(id);
    if (site) site.areas = areas;
  }

  async function showSite(id) {
    scheduleRender();
    if (sites.has(id)) {
      await loadAreas(id);
      scheduleRender();
    }
  }

  async function moveMower() {
    const id = state.selected;
    if (!id) return;
    const site = siteOf.value || null;
    try {
      const changed = await fleet(`/v1/mowers/${id}`, { method: "PATCH", json: { site_id: site } });
      state.mowers.get(id).site = changed.site_id || null;
      $("command-error").textContent = "";
      scheduleRender();
    } catch (err) {
      $("command-error").textContent = err.message;
    }
  }

  // --- the hooks ---------------------------------------------------------------------------

  const siteName = (m) => (m.site && sites.has(m.site) ? sites.get(m.site).name : null);

  hooks.start.push(async () => {
    await loadSites();
    setInterval(() => { if (state.token) quietly(loadSites()); }, 60000);
  });

  hooks.select.push(renderDetailSite);

  hooks.visible.push((m) => {
    if (filter === "") return true;
    if (filter === NO_SITE) return !siteName(m);
    return m.site === filter;
  });

  // Grouped by site (by name; mowers without a site last), each group under its header.
  hooks.list.push((mowers) => {
    if (!sites.size) return mowers;
    const groups = new Map();
    for (const m of mowers) {
      const key = siteName(m) ? m.site : NO_SITE;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(m);
    }
    const keys = [...groups.keys()].sort((a, b) => {
      if (a === NO_SITE || b === NO_SITE) return a === NO_SITE ? 1 : -1;
      return sites.get(a).name.localeCompare(sites.get(b).name);
    });
    return keys.flatMap((key) => [
      { header: key === NO_SITE ? t("no site") : sites.get(key).name, key },
      ...groups.get(key),
    ]);
  });

  function shownAreas() {
    const site = sites.get(filter);
    return site && site.areas ? site.areas.features : [];
  }

  hooks.mapPoints.push(() => shownAreas().flatMap((f) =>
    f.geometry.coordinates[0].map(([lon, lat]) => [lat, lon])));

  hooks.mapLayers.push((project, toScreen) => {
    const features = shownAreas();
    if (!features.length) return [];
    const hatch = svg("pattern", { id: "stay-out-hatch", width: 8, height: 8,
      patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    hatch.append(svg("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: "#c62828", "stroke-width": 3 }));
    const defs = svg("defs");
    defs.append(hatch);
    // Work areas first, stay-out zones over them.
    const ordered = [...features].sort((a, b) =>
      (a.properties.kind === "stay_out") - (b.properties.kind === "stay_out"));
    return [defs, ...ordered.map((f) => {
      const d = f.geometry.coordinates.map((ring) => ring.map(([lon, lat]) => toScreen(project([lat, lon])))
        .map(([x, y], i) => `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join("") + "Z").join("");
      const kind = f.properties.kind;
      const path = svg("path", { d, "fill-rule": "evenodd", "data-area": f.properties.name,
        "data-kind": kind, class: `area area-${kind.replace("_", "-")}` });
      const title = svg("title");
      title.textContent = `${f.properties.name} (${kind === "stay_out" ? t("stay out") : t("work area")})`;
      path.append(title);
      return path;
    })];
  });
})();
