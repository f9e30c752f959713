// End-to-end test of the API reference page (/docs) in headless Chromium
// (Debian's, through playwright-core; nothing downloads a browser), against
// a running Meridian. Checks that every operation of the served OpenAPI
// document appears, that Redoc's search finds one, that the curl and Python
// examples of company_registry/search name this deployment and the
// catalogue's example, that the try-it form calls the sandbox first and
// never stores the key, and that the page has no script error, no blocked
// resource and no request to another origin. Screenshots: OUT_DIR.
// Usage: MERIDIAN_API_KEY=… node docs-e2e.mjs BASE_URL OUT_DIR
import { runE2E, expect } from "./browser-lib.mjs";

const [base, outDir] = process.argv.slice(2);
const apiKey = process.env.MERIDIAN_API_KEY;
if (!base || !outDir || !apiKey) {
  console.error("usage: MERIDIAN_API_KEY=… docs-e2e.mjs BASE_URL OUT_DIR");
  process.exit(2);
}
const origin = new URL(base).origin;

await runE2E(outDir, 60000, async ({ page, context, step, shot, pageErrors }) => {
  const foreign = [];
  const blocked = [];
  page.on("request", (r) => { if (new URL(r.url()).origin !== origin && !r.url().startsWith("data:")) foreign.push(r.url()); });
  page.on("requestfailed", (r) => blocked.push("failed: " + r.url() + " " + (r.failure() || {}).errorText));
  page.on("response", (r) => { if (r.status() >= 400) blocked.push(r.status() + " " + r.url()); });
  // Every page load reports its policy violations here, as they happen.
  const violations = [];
  await page.exposeFunction("reportViolation", (v) => violations.push(v));
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => window.reportViolation(e.violatedDirective + " " + e.blockedURI + " at " + e.sourceFile + ":" + e.lineNumber + ":" + e.columnNumber + " " + e.sample));
  });
  const doc = await (await fetch(base + "/openapi.json")).json();
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths)) for (const method of Object.keys(item)) ops.push(method + path);

  await step("the page loads and Redoc renders the served document", async () => {
    await page.goto(base + "/docs");
    await page.locator("#redoc").getByText("company_registry").first().waitFor();
    expect(doc.servers[0].url === origin, "servers: " + JSON.stringify(doc.servers));
    await shot("01-desktop");
  });

  await step(`every operation of the document appears (${ops.length})`, async () => {
    // Redoc renders sections as they scroll into view: scroll through.
    const seen = new Set();
    const look = async () => {
      const text = (await page.locator("#redoc").textContent()).replace(/\s+/g, "").toLowerCase();
      for (const op of ops) if (text.includes(op)) seen.add(op);
    };
    // Under load sections arrive late: keep scrolling (and waiting at the
    // bottom) until every operation was seen or 90 seconds have passed.
    await page.evaluate(() => window.scrollTo(0, 0));
    const deadline = Date.now() + 90000;
    while (seen.size < ops.length && Date.now() < deadline) {
      await look();
      const bottom = await page.evaluate(() => { window.scrollBy(0, 800); return window.innerHeight + window.scrollY >= document.body.scrollHeight - 5; });
      await page.waitForTimeout(bottom ? 400 : 80);
    }
    await look();
    const missing = ops.filter((o) => !seen.has(o));
    expect(missing.length === 0, "not shown: " + missing.join(", "));
  });

  await step("search finds an operation", async () => {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.keyboard.press("Control+k");
    await page.locator("[data-testid=search-dialog]").waitFor();
    await page.keyboard.type("Company register search");
    // The results list the operation by its path (highlighted in parts).
    await page.waitForFunction(() => [...document.querySelectorAll("[data-testid=search-dialog]")]
      .some((d) => d.textContent.replace(/\s+/g, "").includes("GET/v1/company_registry/search")));
    await shot("02-search");
    await page.keyboard.press("Escape");
  });

  await step("company_registry/search's curl and Python examples name this deployment and the catalogue's example", async () => {
    const op = doc.paths["/v1/company_registry/search"].get;
    const want = origin + "/v1/company_registry/search?query=acme";
    const samples = Object.fromEntries(op["x-codeSamples"].map((s) => [s.lang, s.source]));
    expect(Object.keys(samples).join(",") === "curl,python,javascript", "langs " + Object.keys(samples));
    for (const lang of ["curl", "python"]) expect(samples[lang].includes(want), lang + ": " + samples[lang]);
    await page.goto(base + "/docs#tag/company_registry/operation/company_registry_search");
    const panel = page.locator("#redoc");
    await panel.getByText("Company register search").first().waitFor();
    // Redoc shows one language at a time, picked from a menu (curl first).
    const shows = (marker) => page.waitForFunction(([w, m]) => {
      const t = document.getElementById("redoc").textContent;
      return t.includes(w) && t.includes(m);
    }, [want, marker]);
    await shows("curl -s");
    await panel.getByRole("button", { name: "curl", exact: true }).first().click();
    await page.getByText("Python", { exact: true }).last().click();
    await shows("requests.get(");
    await shot("03-operation-examples");
  });

  await step("try it: the sandbox is first; the key is sent to this deployment only and stored nowhere", async () => {
    await page.goto(base + "/docs");
    await page.locator("#tryit summary").click();
    expect(await page.locator("#tryit-sandbox").isChecked(), "the sandbox is not the default");
    expect((await page.locator("input[name=target]").first().getAttribute("value")) === "sandbox", "the sandbox is not shown first");
    await page.selectOption("#tryit-operation", "company_registry_search");
    await page.fill("#tryit-key", apiKey);
    await page.click("#tryit-send");
    await page.locator("#tryit-status").filter({ hasText: /^200 GET \/sandbox\/company_registry\/search/ }).waitFor();
    expect(/"synthetic": true/.test(await page.locator("#tryit-body").textContent()), "not the sandbox's answer");
    await page.check("#tryit-live");
    expect(/spends 1 credit/.test(await page.locator("#tryit-price").textContent()), "the live call does not say it spends credits");
    await page.click("#tryit-send");
    await page.locator("#tryit-status").filter({ hasText: /^200 GET \/v1\/company_registry\/search/ }).waitFor();
    await shot("04-try-it");
    const stored = await page.evaluate(async () => {
      const idb = indexedDB.databases ? (await indexedDB.databases()).map((d) => d.name) : [];
      return JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage }, c: document.cookie, idb, u: location.href });
    });
    expect(!stored.includes(apiKey) && !stored.includes("mn_"), "the key is in the page's storage: " + stored);
    expect((await context.cookies()).every((c) => !c.value.includes(apiKey)), "the key is in a cookie");
  });

  await step("a phone's width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(base + "/docs");
    await page.locator("#redoc").getByRole("heading", { name: /Meridian public data API/ }).first().waitFor();
    await page.waitForTimeout(500);
    await shot("05-phone");
  });

  await step("no script error, no blocked resource, no request to another origin", async () => {
    expect(violations.length === 0, "CSP violations: " + violations.join("; "));
    expect(blocked.length === 0, "blocked or failed: " + blocked.join("; "));
    expect(foreign.length === 0, "requests to other origins: " + foreign.join("; "));
    expect(pageErrors.length === 0, "page errors: " + pageErrors.join("; "));
  });
});
