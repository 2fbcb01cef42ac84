// The account dashboard: a client of /account/api/* (docs/account.md). No framework, no
// CDN: served by postal itself, under a CSP without inline scripts.
"use strict";

const app = document.getElementById("app");
let me = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (method !== "GET") {
    headers["X-CSRF-Token"] = me ? me.csrfToken : "";
    headers["Content-Type"] = "application/json";
  }
  const response = await fetch("/account/api" + path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) { location.href = "/account"; throw new Error("Not signed in"); }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function usd(n) { return Number(n).toFixed(6).replace(/0{1,4}$/, "") + " USD"; }

// A change of keys, limits, identities or money needs a sign-in of the last 15 minutes:
// the server says "Sign in again to do this…", and the page offers it (the provider's
// page, back here after; then the change is made again).
function problem(where, error) {
  const again = error.message.startsWith("Sign in again to do this") ? el("button", { class: "secondary",
    id: "sign-in-again", onclick: async () => {
      try { location.assign((await api("POST", "/reauth")).url); } catch (e) { problem(where, e); }
    } }, "Sign in again") : null;
  where.replaceChildren(el("p", { class: "error", role: "alert" }, error.message, again ? " " : null, again));
}

async function render(shown) {
  me = await api("GET", "/me");
  const [keys, usage, ledger, sessions, audit, topups, alerts] = await Promise.all([
    api("GET", "/keys"), api("GET", "/usage?days=30"), api("GET", "/ledger"), api("GET", "/sessions"),
    api("GET", "/audit"), api("GET", "/topups"), api("GET", "/alerts"),
  ]);
  app.replaceChildren(...[
    overview(), fundsArea(topups), shown ? shownOnce(shown) : null, keysArea(keys.keys), limitsArea(),
    alertsArea(alerts),
    usageArea(usage.usage, keys.keys, ""), ledgerArea(ledger), securityArea(sessions.sessions),
    auditArea(audit.entries),
  ].filter(Boolean));
  if (shown) document.getElementById("new-key").focus();
}

function overview() {
  return el("section", { "aria-labelledby": "h-overview" },
    el("h2", { id: "h-overview" }, "Balance"),
    el("div", { class: "cards" },
      el("div", { class: "card" }, "Balance", el("b", { id: "balance" }, usd(me.balance))),
      el("div", { class: "card" }, "Queries left", el("b", { id: "queries-left" }, me.queriesLeft.toLocaleString("en"))),
      el("div", { class: "card" }, "Account", el("b", {}, el("code", {}, me.accountId)))),
    el("p", {}, el("button", { class: "secondary", id: "signout", onclick: signout }, "Sign out")));
}

async function signout() {
  await api("POST", "/signout", {});
  location.href = "/account";
}

function shownOnce(key) {
  const copy = el("button", { class: "secondary", onclick: async () => {
    await navigator.clipboard.writeText(key.apiKey).catch(() => {});
    copy.textContent = "Copied";
  } }, "Copy");
  return el("div", { class: "shown-once", role: "status" },
    el("p", {}, el("strong", {}, "Your new key. "), "It is shown only this once: copy it now and keep it secret."),
    el("p", {}, el("code", { id: "new-key", tabindex: "-1" }, key.apiKey), " ", copy),
    el("p", { class: "muted" }, "Try it: ", el("code", {},
      `curl -s ${location.origin}/api/aboutapi -H 'Authorization: Bearer ${key.apiKey}' -d '{}'`)));
}

function keysArea(keys) {
  const message = el("div");
  const rows = keys.map((k) => el("tr", {},
    el("td", {}, k.name || el("span", { class: "muted" }, "(no name)")),
    el("td", {}, k.kind, k.origins ? el("div", { class: "muted" }, k.origins.join(", ")) : null),
    el("td", {}, el("code", {}, (k.hint || k.keyId) + "…")),
    el("td", {}, k.createdAt.slice(0, 10)),
    el("td", { class: "last-used" }, k.lastUsedAt ? k.lastUsedAt.slice(0, 16).replace("T", " ") + " UTC" : el("span", { class: "muted" }, "never")),
    el("td", { class: "queries-30" }, k.queriesLast30Days.toLocaleString("en")),
    el("td", {}, k.revoked ? "revoked " + k.revokedAt.slice(0, 10) : [
      k.expiresAt ? el("div", { class: "muted" }, "works until " + k.expiresAt.replace("T", " ").replace("Z", " UTC")) : null,
      k.expiresAt ? null : el("button", { class: "secondary", "aria-label": `Roll ${k.name || k.keyId}`, onclick: async () => {
        const hours = prompt("Roll: a new key now; the old one keeps working for how many hours (1 to 168)?", "24");
        if (hours === null) return;
        try {
          await render(await api("POST", `/keys/${encodeURIComponent(k.keyId)}/roll`, { graceHours: Number(hours) }));
        } catch (e) { problem(message, e); }
      } }, "Roll"), " ",
      el("button", { class: "secondary", "aria-label": `Revoke ${k.name || k.keyId}`, onclick: async () => {
        if (!confirm(`Revoke ${k.name || k.keyId}? Requests with it get 401 from now on.`)) return;
        try {
          await api("DELETE", "/keys/" + encodeURIComponent(k.keyId));
          await render();
        } catch (e) { problem(message, e); }
      } }, "Revoke")])));
  const kind = el("select", { id: "key-kind" }, el("option", { value: "secret" }, "Secret (servers)"),
    el("option", { value: "publishable" }, "Publishable (web pages)"));
  const origins = el("input", { id: "key-origins", placeholder: "https://shop.example.com", size: 40 });
  const name = el("input", { id: "key-name", maxlength: 100, placeholder: "e.g. checkout server" });
  const form = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    const body = { name: name.value, kind: kind.value };
    if (kind.value === "publishable") body.origins = origins.value.split(/[\s,]+/).filter(Boolean);
    try { await render(await api("POST", "/keys", body)); } catch (e) { problem(message, e); }
  } },
    el("label", { for: "key-name" }, "Name"), name,
    el("label", { for: "key-kind" }, "Kind"), kind,
    el("label", { for: "key-origins" }, "Origins of a publishable key (space-separated)"), origins,
    el("p", {}, el("button", { type: "submit", id: "create-key" }, "Create key")), message);
  return el("section", { "aria-labelledby": "h-keys" }, el("h2", { id: "h-keys" }, "API keys"),
    el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Name", "Kind", "Key", "Created", "Last used", "Queries (30 days)", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", { id: "keys" }, rows))), form);
}

// Back from Stripe's page (`/account?topup=top_…`): the top-up is shown as pending, and
// the page asks for the top-ups alone every 2 s (a minute at most) until Stripe's webhook
// has credited it; then the whole page once (the balance).
const returned = new URLSearchParams(location.search);
let polls = 0;

function fundsArea(topups) {
  const section = el("section", { "aria-labelledby": "h-funds" }, el("h2", { id: "h-funds" }, "Add funds"));
  if (!topups.enabled) {
    section.append(el("p", { class: "muted", id: "funds-off" }, topups.howTo));
    return section;
  }
  const back = topups.topups.find((t) => t.topupId === returned.get("topup"));
  if (back) {
    let text = null;
    if (back.status === "paid") text = `Payment received: ${usd(back.credited)} added to your balance.`;
    else if (returned.get("cancelled")) text = "Payment cancelled; nothing was charged.";
    else if (back.status === "pending" && polls < 30) {
      text = "Waiting for the payment to be confirmed…";
      polls += 1;
      setTimeout(async () => {
        try {
          const fresh = await api("GET", "/topups");
          const now = fresh.topups.find((t) => t.topupId === back.topupId);
          if (now && now.status === "pending" && polls < 30) section.replaceWith(fundsArea(fresh));
          else await render();
        } catch (e) { problem(app, e); }
      }, 2000);
    } else text = `This top-up is ${back.status}.`;
    section.append(el("p", { role: "status", id: "topup-status" }, text));
  }
  const amount = el("input", { id: "topup-amount", type: "text", inputmode: "decimal", value: "5.00",
    "aria-describedby": "topup-help", autocomplete: "off" });
  const message = el("div");
  const form = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    try {
      const started = await api("POST", "/topups", { amount: amount.value.trim() });
      location.assign(started.url);
    } catch (e) { problem(message, e); }
  } },
    el("p", {}, topups.presets.map((p) => [el("button", { type: "button", class: "secondary preset",
      onclick: () => { amount.value = p.toFixed(2); } }, `${p} USD`), " "])),
    el("label", { for: "topup-amount" }, "Amount (USD)"), amount,
    el("p", { id: "topup-help", class: "muted" },
      `From ${topups.minimum.toFixed(2)} to ${topups.maximum.toFixed(2)} USD, in whole cents, credited in full. ` +
      "You pay on Stripe's page; the balance grows once Stripe confirms the payment."),
    el("p", {}, el("button", { type: "submit", id: "add-funds" }, "Add funds")), message);
  section.append(form);
  if (topups.topups.length) {
    section.append(el("div", { class: "table-wrap" }, el("table", { id: "topups" },
      el("thead", {}, el("tr", {}, ["Started (UTC)", "Amount", "Status", "Credited", "Refunded"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, topups.topups.slice(0, 20).map((t) => el("tr", {},
        el("td", {}, t.createdAt.replace("T", " ").replace("Z", "")), el("td", {}, usd(t.amount)),
        el("td", {}, t.status === "pending" && t.url ? el("a", { href: t.url }, "pending: pay") : t.status),
        el("td", {}, t.credited === null ? "" : usd(t.credited)), el("td", {}, t.refunded ? usd(t.refunded) : "")))))));
  }
  return section;
}

function limitsArea() {
  const input = (id, label, value) => [el("label", { for: id }, label),
    el("input", { id, type: "number", min: 1, value: value ?? "", placeholder: "no limit" })];
  const message = el("div");
  const form = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    const read = (id) => { const v = document.getElementById(id).value; return v === "" ? null : Number(v); };
    try {
      await api("PUT", "/limits", { perMinute: read("limit-minute"), perHour: read("limit-hour"), perDay: read("limit-day") });
      message.replaceChildren(el("p", { role: "status" }, "Limits saved; in force from the next request."));
    } catch (e) { problem(message, e); }
  } },
    input("limit-minute", "Queries per minute", me.limits.perMinute),
    input("limit-hour", "Queries per hour", me.limits.perHour),
    input("limit-day", "Queries per day", me.limits.perDay),
    el("p", {}, el("button", { type: "submit", id: "save-limits" }, "Save limits")), message);
  return el("section", { "aria-labelledby": "h-limits" }, el("h2", { id: "h-limits" }, "Rate limits"),
    el("p", { class: "muted" }, "Empty means no limit. A request beyond a limit gets 429 and is not charged."), form);
}

// Alerts (docs/alerts.md): what the account hears of, by e-mail and signed webhook, the
// webhook's secret shown once, a test, and the last deliveries.
function alertsArea(alerts) {
  const s = alerts.settings;
  const message = el("div");
  const secret = (text) => message.replaceChildren(el("div", { class: "shown-once", role: "status" },
    el("p", {}, el("strong", {}, "The webhook's signing secret. "), "It is shown only this once: keep it to verify signatures."),
    el("p", {}, el("code", { id: "webhook-secret" }, text))));
  const field = (id, label, attrs) => [el("label", { for: id }, label), el("input", { id, ...attrs })];
  const mailNote = !alerts.mailAvailable ? "E-mail alerts are off on this server: its operator has set no mail relay."
    : !alerts.emailAddress ? "No verified e-mail address: link an identity whose provider gives one." : null;
  const form = el("form", { onsubmit: async (event) => {
    event.preventDefault();
    const value = (id) => { const v = document.getElementById(id).value.trim(); return v === "" ? null : v; };
    const percent = value("alert-percent");
    try {
      const saved = await api("PUT", "/alerts", { balanceBelow: value("alert-balance"),
        limitPercent: percent === null ? null : Number(percent), email: document.getElementById("alert-email").checked,
        webhookUrl: value("alert-webhook") });
      if (saved.webhookSecret) secret(saved.webhookSecret);
      else message.replaceChildren(el("p", { role: "status" }, "Alerts saved."));
    } catch (e) { problem(message, e); }
  } },
    field("alert-balance", "Balance below (USD)", { type: "text", inputmode: "decimal", value: s.balanceBelow ?? "", placeholder: "no alert" }),
    field("alert-percent", "Rate-limit window used (%)", { type: "number", min: 1, max: 100, value: s.limitPercent ?? "", placeholder: "no alert" }),
    el("label", {}, el("input", { id: "alert-email", type: "checkbox", checked: s.email }), " E-mail"),
    mailNote ? el("p", { class: "muted", id: "mail-note" }, mailNote) : null,
    field("alert-webhook", "Webhook URL (https)", { type: "url", value: s.webhookUrl ?? "", placeholder: "no webhook" }),
    el("p", {}, el("button", { type: "submit", id: "save-alerts" }, "Save alerts"), " ",
      el("button", { type: "button", class: "secondary", id: "test-alerts", onclick: async () => {
        try {
          const sent = await api("POST", "/alerts/test");
          message.replaceChildren(el("p", { role: "status" }, sent.channels.length
            ? `Test event ${sent.event} sent to ${sent.channels.join(" and ")}.` : "No channel to send to."));
        } catch (e) { problem(message, e); }
      } }, "Send a test"), " ",
      s.webhookUrl ? el("button", { type: "button", class: "secondary", id: "roll-secret", onclick: async () => {
        if (!confirm("A new signing secret? The old one signs nothing from now.")) return;
        try { secret((await api("POST", "/alerts/roll-secret")).webhookSecret); } catch (e) { problem(message, e); }
      } }, "New signing secret") : null),
    message);
  const rows = alerts.deliveries.map((d) => el("tr", {},
    el("td", {}, d.at.replace("T", " ").replace("Z", " UTC")), el("td", {}, d.type), el("td", {}, d.channel),
    el("td", {}, d.attempt), el("td", {}, d.status), el("td", {}, d.result || "")));
  return el("section", { "aria-labelledby": "h-alerts" }, el("h2", { id: "h-alerts" }, "Alerts"),
    el("p", { class: "muted" }, "Hear before the balance runs out: below a balance, near a rate limit, on top-ups, ",
      "and of every new key (by e-mail). Webhooks are signed as Standard Webhooks specifies."), form,
    rows.length ? el("table", { id: "deliveries" }, el("thead", {}, el("tr", {}, ["When", "Event", "Channel", "Attempt", "Status", "Result"]
      .map((h) => el("th", {}, h)))), el("tbody", {}, rows)) : el("p", { class: "muted" }, "Nothing sent yet."));
}

// The usage of every key (`key` ""), or of one: the chart, its table and the CSV link.
function usageArea(lines, keys, key) {
  const days = [];
  const today = new Date();
  for (let i = 29; i >= 0; i--) {
    const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i));
    days.push(d.toISOString().slice(0, 10));
  }
  const perDay = Object.fromEntries(days.map((d) => [d, 0]));
  for (const l of lines) if (l.date in perDay) perDay[l.date] += l.queries;
  const max = Math.max(1, ...Object.values(perDay));
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 620 170");
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-labelledby", "chart-title");
  const title = document.createElementNS(ns, "title");
  title.id = "chart-title";
  title.textContent = "Billed queries per day, last 30 days (UTC)";
  svg.append(title);
  days.forEach((d, i) => {
    const h = Math.round((perDay[d] / max) * 130);
    const bar = document.createElementNS(ns, "rect");
    Object.entries({ class: "bar", x: 10 + i * 20, y: 140 - h, width: 16, height: h }).forEach(([k, v]) => bar.setAttribute(k, v));
    const tip = document.createElementNS(ns, "title");
    tip.textContent = `${d}: ${perDay[d]} queries`;
    bar.append(tip);
    svg.append(bar);
    if (i % 5 === 0) {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", 10 + i * 20); t.setAttribute("y", 160); t.textContent = d.slice(5);
      svg.append(t);
    }
  });
  const rows = lines.slice().reverse().map((l) => el("tr", {}, el("td", {}, l.date), el("td", {}, l.endpoint),
    el("td", {}, l.queries), el("td", {}, usd(l.charged))));
  const which = el("select", { id: "usage-key", onchange: async () => {
    const query = which.value ? "&key=" + encodeURIComponent(which.value) : "";
    const fresh = await api("GET", "/usage?days=30" + query);
    section.replaceWith(usageArea(fresh.usage, keys, which.value));
    document.getElementById("usage-key").focus();
  } }, el("option", { value: "" }, "All keys"),
    keys.map((k) => el("option", { value: k.keyId, selected: k.keyId === key },
      (k.name || "(no name)") + " · " + (k.hint || k.keyId) + "…" + (k.revoked ? " (revoked)" : ""))));
  const csv = "/account/api/usage?days=30&format=csv" + (key ? "&key=" + encodeURIComponent(key) : "");
  const section = el("section", { "aria-labelledby": "h-usage" }, el("h2", { id: "h-usage" }, "Usage"),
    el("p", {}, el("label", { for: "usage-key" }, "Key"), which),
    el("p", {}, `Highest day: ${max === 1 && !lines.length ? 0 : max} queries. `,
      el("a", { href: csv, download: "postal-usage.csv" }, "Download CSV")),
    svg,
    el("details", {}, el("summary", {}, "Usage as a table"),
      el("div", { class: "table-wrap" }, el("table", { id: "usage" },
        el("thead", {}, el("tr", {}, ["Day (UTC)", "Operation", "Queries", "Charged"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rows)))));
  return section;
}

function ledgerRows(entries) {
  return entries.map((e) => el("tr", {}, el("td", {}, e.at.replace("T", " ").replace("Z", "")),
    el("td", {}, e.kind), el("td", {}, usd(e.amount)), el("td", {}, usd(e.balanceAfter)),
    el("td", {}, e.note || (e.endpoint ? `${e.queries} × ${e.endpoint}` : ""))));
}

// The ledger's first page (100 entries, newest first); "Older entries" appends the next.
function ledgerArea(ledger) {
  const body = el("tbody", {}, ledgerRows(ledger.entries));
  const more = el("p", {});
  const older = (cursor) => {
    more.replaceChildren(cursor ? el("button", { class: "secondary", onclick: async () => {
      try {
        const page = await api("GET", "/ledger?cursor=" + encodeURIComponent(cursor));
        body.append(...ledgerRows(page.entries));
        older(page.nextCursor);
      } catch (e) { problem(more, e); }
    } }, "Older entries") : "");
  };
  older(ledger.nextCursor);
  return el("section", { "aria-labelledby": "h-ledger" }, el("h2", { id: "h-ledger" }, "Ledger"),
    el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["When (UTC)", "Kind", "Amount", "Balance after", "Note"].map((h) => el("th", { scope: "col" }, h)))),
      body)), more);
}

function securityArea(sessions) {
  const linking = el("div");
  return el("section", { "aria-labelledby": "h-security" }, el("h2", { id: "h-security" }, "Sign-ins"),
    el("ul", { id: "identities" }, me.identities.map((i) => el("li", {}, `${i.provider}: `, i.email || i.subject,
      el("span", { class: "muted" }, ` (since ${i.linkedAt.slice(0, 10)}) `),
      me.identities.length > 1 ? el("button", { class: "secondary", onclick: async () => {
        try {
          await api("POST", "/identities/unlink", { issuer: i.issuer, subject: i.subject });
          await render();
        } catch (e) { problem(linking, e); }
      } }, "Unlink") : null))),
    el("p", {}, "Link another sign-in (the provider asks you to sign in, then you confirm): ",
      me.providers.map((p) => [el("button", { class: "secondary link", onclick: async () => {
        try { location.assign((await api("POST", "/identities/link", { provider: p })).url); }
        catch (e) { problem(linking, e); }
      } }, p), " "])),
    linking,
    el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["Session", "Signed in", "Last seen", "Browser", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, sessions.map((s) => el("tr", {}, el("td", {}, s.sessionId, s.current ? " (this one)" : ""),
        el("td", {}, s.signedInAt), el("td", {}, s.lastSeenAt), el("td", {}, s.client || ""),
        el("td", {}, s.current ? "" : el("button", { class: "secondary", onclick: async () => {
          await api("DELETE", "/sessions/" + encodeURIComponent(s.sessionId));
          await render();
        } }, "End"))))))));
}

function auditArea(entries) {
  return el("section", { "aria-labelledby": "h-audit" }, el("h2", { id: "h-audit" }, "Audit log"),
    el("p", {}, "Every change to keys, limits, money and sign-ins, by you or by the operator. ",
      el("a", { href: "/account/api/audit?format=csv", download: "postal-audit.csv" }, "Download CSV")),
    el("div", { class: "table-wrap" }, el("table", { id: "audit" },
      el("thead", {}, el("tr", {}, ["When (UTC)", "Who", "What", "Detail"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, entries.slice(0, 200).map((e) => el("tr", {},
        el("td", {}, e.at.replace("T", " ").replace("Z", "")), el("td", {}, e.actor),
        el("td", {}, e.action), el("td", {}, e.detail)))))));
}

render().catch((e) => problem(app, e));
