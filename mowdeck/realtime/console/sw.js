// The Mowdeck console's service worker: shows each Web Push as a notification, and opens
// the mower's page when one is clicked. Nothing is cached: the console is live or nothing.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

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
    data: { mower_id: message.mower_id || null, url: message.url || null },
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

// Opens (or focuses) the console on the mower the notification is about.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  const base = data.url || self.registration.scope;
  const target = data.mower_id ? `${base.split("?")[0]}?mower=${encodeURIComponent(data.mower_id)}` : base;
  event.waitUntil((async () => {
    const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const client of open) {
      if (client.url.startsWith(self.registration.scope) && "focus" in client) {
        await client.focus();
        return client.navigate ? client.navigate(target) : null;
      }
    }
    return self.clients.openWindow(target);
  })());
});
