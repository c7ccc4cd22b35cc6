// The brand and model of each mower, and a mark on the mowers whose emergency stop is a
// pause (OpenMower and Automower Connect offer no remote emergency stop: docs/gateway.md).
// app.js keeps the connection kind from Fleet's listing (m.kind) and calls
// mowerBrand(m) for the list and mowerBrandLine(m) for the detail's heading.
"use strict";

const BRANDS = {
  simulator: { brand: "Mowdeck", model: "simulated", stopIsPause: false },
  openmower: { brand: "OpenMower", model: "", stopIsPause: true },
  automower: { brand: "Husqvarna Automower", model: "", stopIsPause: true },
};
const BRANDS_DE = {
  "simulated": "simuliert",
  "stop = pause": "Stopp = Pause",
  "This mower has no remote emergency stop: STOP pauses it, and reports executed once it stands still.":
    "Dieser Mäher hat keinen Fern-Notstopp: STOPP pausiert ihn und meldet ausgeführt, sobald er steht.",
};

// The vendors' error texts (GET /console/errors.json), for an alarm's words.
let ERROR_TEXTS = null;
fetch("/console/errors.json")
  .then((r) => (r.ok ? r.json() : null))
  .then((d) => { ERROR_TEXTS = d && d.codes; if (typeof renderAlarms === "function") renderAlarms(); })
  .catch(() => {});

// "automower.24: Cutting system blocked" (German where known and chosen), else the code.
function errorLabel(code) {
  const m = /^automower\.(\d+)$/.exec(code || "");
  const texts = m && ERROR_TEXTS && ERROR_TEXTS[m[1]];
  if (!texts) return code;
  return `${code}: ${(brandText.de() && texts.de) || texts.en}`;
}

function brandText(text) {
  return brandText.de() ? BRANDS_DE[text] || text : text;
}
brandText.de = () => typeof state !== "undefined" && state.locale === "de";

function brandOf(m) {
  const known = BRANDS[m.kind] || { brand: m.kind || "", model: "", stopIsPause: false };
  const raw = (m.state && m.state.raw) || {};
  const model = raw["automower.model"] || known.model;
  return { brand: known.brand, model: model ? brandText(model) : "", stopIsPause: known.stopIsPause };
}

// The list's brand cell: brand, model, and the pause mark.
function mowerBrand(m) {
  const b = brandOf(m);
  const cell = document.createElement("span");
  cell.className = "brand";
  cell.dataset.brand = m.kind || "";
  cell.textContent = b.model ? `${b.brand} · ${b.model}` : b.brand;
  if (b.stopIsPause) {
    const mark = document.createElement("span");
    mark.className = "stop-is-pause";
    mark.dataset.stopIsPause = "true";
    mark.textContent = brandText("stop = pause");
    mark.title = brandText("This mower has no remote emergency stop: STOP pauses it, and reports executed once it stands still.");
    cell.append(" ", mark);
  }
  return cell;
}

// The detail heading's second line: "Husqvarna Automower · 450X (stop = pause)".
function mowerBrandLine(m) {
  const b = brandOf(m);
  const text = b.model ? `${b.brand} · ${b.model}` : b.brand;
  return b.stopIsPause ? `${text} (${brandText("stop = pause")})` : text;
}
