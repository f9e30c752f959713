// The API reference page: Redoc renders the deployment's own OpenAPI
// document, and the try-it form beside it calls this deployment with the
// reader's key. The key lives only in its input while the page is open:
// it is never written to cookies or web storage, never sent anywhere but
// this page's own origin, and cleared when the page is left.
import { init } from "/docs/assets/redoc.standalone.js";

const $ = (id) => document.getElementById(id);

async function loadDocument() {
  const res = await fetch("/openapi.json", { credentials: "omit", cache: "no-cache" });
  if (!res.ok) throw new Error("GET /openapi.json answered " + res.status);
  return res.json();
}

// operations lists what the form can call: every operation without a
// request body (batch takes JSON: its code samples show it).
function operations(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (op && typeof op === "object" && op.operationId && !op.requestBody) {
        out.push({ method: method.toUpperCase(), path, op });
      }
    }
  }
  return out;
}

function credits(n) {
  return n === 1 ? "1 credit" : n + " credits";
}

function setupTryIt(doc) {
  const all = operations(doc);
  const select = $("tryit-operation");
  const params = $("tryit-params");
  const price = $("tryit-price");
  const key = $("tryit-key");
  const target = () => ($("tryit-live").checked ? "live" : "sandbox");
  const current = () => all.find((o) => o.op.operationId === select.value);

  const fillOperations = () => {
    const keep = select.value || "company_registry_search";
    const shown = all.filter((o) => target() === "live" || o.op["x-sandbox"]);
    select.replaceChildren(...shown.map((o) => {
      const opt = document.createElement("option");
      opt.value = o.op.operationId;
      opt.textContent = o.method + " " + (target() === "live" ? o.path : o.op["x-sandbox"]) + " — " + (o.op.summary || "");
      return opt;
    }));
    if (shown.some((o) => o.op.operationId === keep)) select.value = keep;
    fillParams();
  };

  const fillParams = () => {
    const o = current();
    params.replaceChildren();
    if (!o) return;
    const cost = Number(o.op["x-credit-cost"] || 0);
    if (target() === "live") {
      price.className = "note warn";
      price.textContent = cost > 0
        ? "A successful call spends " + credits(cost) + " from your balance (a failed one costs 0). Add dry_run=1 for a free estimate."
        : "This operation is free (0 credits).";
    } else {
      price.className = "note";
      price.textContent = "Sandbox: free synthetic data, 0 credits, same parameters and validation as " + o.path + ".";
    }
    for (const p of o.op.parameters || []) {
      if (!p.name || (p.in !== "query" && p.in !== "path")) continue;
      const label = document.createElement("label");
      const caption = document.createElement("span");
      caption.textContent = p.name + (p.required ? " (required)" : "") + (p.description ? ": " + p.description : "");
      const input = document.createElement("input");
      input.type = "text";
      input.dataset.name = p.name;
      input.dataset.in = p.in;
      input.autocomplete = "off";
      const schema = p.schema || {};
      if (p.required && schema.examples && schema.examples.length) input.value = String(schema.examples[0]);
      if (schema.default !== undefined) input.placeholder = "default " + schema.default;
      label.append(caption, input);
      params.append(label);
    }
  };

  const send = async (event) => {
    event.preventDefault();
    const o = current();
    if (!o) return;
    let path = target() === "live" ? o.path : o.op["x-sandbox"];
    const query = new URLSearchParams();
    for (const input of params.querySelectorAll("input")) {
      const v = input.value.trim();
      if (input.dataset.in === "path") path = path.replace("{" + input.dataset.name + "}", encodeURIComponent(v));
      else if (v !== "") query.set(input.dataset.name, v);
    }
    const url = new URL(path + (query.size ? "?" + query : ""), location.origin);
    if (url.origin !== location.origin) throw new Error("refusing to send the key to " + url.origin);
    const headers = {};
    if (key.value.trim()) headers["x-api-key"] = key.value.trim();
    $("tryit-result").hidden = false;
    $("tryit-status").textContent = "Sending " + o.method + " " + url.pathname + url.search + "…";
    $("tryit-meta").textContent = "";
    $("tryit-body").textContent = "";
    try {
      const res = await fetch(url, { method: o.method, headers, credentials: "omit", cache: "no-store", redirect: "error", referrerPolicy: "no-referrer" });
      const text = await res.text();
      let shown = text;
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* markdown or text */ }
      $("tryit-status").textContent = res.status + " " + o.method + " " + url.pathname + url.search;
      const used = res.headers.get("x-credits-used");
      $("tryit-meta").textContent = "request id " + (res.headers.get("x-request-id") || "–") + (used !== null ? ", credits used " + used : "");
      $("tryit-body").textContent = shown;
    } catch (e) {
      $("tryit-status").textContent = "The call failed: " + e.message;
    }
  };

  for (const radio of document.querySelectorAll("input[name=target]")) radio.addEventListener("change", fillOperations);
  select.addEventListener("change", fillParams);
  $("tryit-form").addEventListener("submit", send);
  // Leaving the page forgets the key, also from the back-forward cache.
  addEventListener("pagehide", () => { key.value = ""; });
  fillOperations();
}

// Redoc's search asks whether it may index in a worker by compiling a
// function from a string (eval), which this page's policy forbids; refused,
// it indexes in the page. Without Worker it skips the probe and does the
// same, so the page never trips its own policy. Nothing here uses workers.
delete globalThis.Worker;

try {
  const doc = await loadDocument();
  setupTryIt(doc);
  // Hash routing: every reference URL stays /docs, which the server answers.
  init(doc, { disableTelemetry: true, router: "hash" }, $("redoc"));
} catch (e) {
  $("redoc").textContent = "The reference could not load: " + e.message;
  throw e;
}
