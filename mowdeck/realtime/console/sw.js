// The Mowdeck console's service worker: shows each Web Push as a notification, and opens
// the mower's page when one is clicked. Nothing is cached: the console is live or nothing.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

// What a notification offers besides opening the mower: an alarm kind can be acknowledged
// from the notification, and a mower that can still take a command can be sent home.
// The worker holds no token: an action opens the console with it in the address
// (?mower=&action=&kind=), and the page, signed in, does it (app.js, pushIntent).
const ALARM_KINDS = new Set(["mower_stuck", "battery_low", "mower_offline", "left_area", "theft_suspected"]);
const DOCKABLE = new Set(["mower_stuck", "battery_low", "left_area"]);

function actionsFor(message) {
  if (!message.mower_id || !ALARM_KINDS.has(message.kind)) return [];
  const actions = [{ action: "acknowledge", title: "Acknowledge" }];
  if (DOCKABLE.has(message.kind)) actions.push({ action: "dock", title: "Dock" });
  return actions;
}

// A push's payload is what Notifications' webpush channel sends: {title, body, kind,
// mower_id, severity, tag, url}. The tag makes repeats of one kind and mower collapse.
self.addEventListener("push", (event) => {
  let message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch (err) {
    message = { title: "Mowdeck", body: event.data ? event.data.text() : "" };
  }
  const title = message.title || "Mowdeck";
  const options = {
    body: message.body || "",
    tag: message.tag || undefined,
    renotify: Boolean(message.tag),
    requireInteraction: message.severity === "critical",
    actions: actionsFor(message),
    data: { mower_id: message.mower_id || null, kind: message.kind || null, url: message.url || null },
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

// The console's address for a notification's data and the action chosen ("" for a click
// on the notification itself).
function targetFor(data, action) {
  const base = (data.url || self.registration.scope).split("?")[0];
  if (!data.mower_id) return base;
  const params = new URLSearchParams({ mower: data.mower_id });
  if (action === "acknowledge" || action === "dock") {
    params.set("action", action);
    if (data.kind) params.set("kind", data.kind);
  }
  return `${base}?${params}`;
}

// Opens (or focuses) the console on the mower the notification is about, carrying the
// action chosen, if any.
async function openFor(data, action) {
  const target = targetFor(data || {}, action || "");
  const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const client of open) {
    if (client.url.startsWith(self.registration.scope) && "focus" in client) {
      try {
        await client.focus();
      } catch (err) {
        // Focusing takes the click's user activation; without it, the page still follows.
      }
      return client.navigate ? client.navigate(target) : null;
    }
  }
  return self.clients.openWindow(target);
}

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(openFor(event.notification.data, event.action));
});
