// End-to-end test of the console's Monitors section in headless Chromium,
// the browser side of TestConsoleMonitorsInChromium (shared/app): the Go
// test serves the API and a hook that delivers scheduled runs.
// Usage: CHROMIUM_PATH=… MERIDIAN_CONSOLE_TOKEN=… node console-monitors-e2e.mjs BASE_URL HOOK_URL OUT_DIR
// Prints one JSON line (browser-lib.mjs) and exits 1 at the first failed step.
import { runE2E, expect } from "./browser-lib.mjs";

const [base, hook, outDir] = process.argv.slice(2);
const token = process.env.MERIDIAN_CONSOLE_TOKEN;
if (!base || !hook || !outDir || !token) {
  console.error("usage: MERIDIAN_CONSOLE_TOKEN=… node FILE BASE_URL HOOK_URL OUT_DIR");
  process.exit(2);
}

await runE2E(outDir, 10000, async ({ page, step, shot, pageErrors }) => {
  let creates = 0;
  page.on("request", (r) => { if (r.method() === "POST" && new URL(r.url()).pathname === "/console/monitors") creates++; });
  // get reads the console API from the page, with its session.
  const get = (path) => page.evaluate(async (p) => {
    const r = await fetch(p, { headers: { accept: "application/json" } });
    return { status: r.status, json: await r.json() };
  }, path);
  const exact = (text) => new RegExp("^" + text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$");
  const keyRow = (name) => page.locator("#keys-table tbody tr", { has: page.locator("td:first-child", { hasText: exact(name) }) });
  const monitorRow = (name) => page.locator("#monitors-table tbody tr", { has: page.locator("td:first-child .name", { hasText: exact(name) }) });
  const errorOf = (id) => page.locator("#" + id + "-error");
  const visibleErrors = () => page.locator("#create-monitor-form .field-error:visible").evaluateAll((ps) => ps.map((p) => p.id));
  const submit = () => page.click("#create-monitor-form button[type=submit]");
  const runIds = () => page.locator("#runs-table tr[data-run-id]").evaluateAll((rs) => rs.map((r) => r.dataset.runId));
  const runCells = (i) => page.locator("#runs-table tr[data-run-id]").nth(i).locator("td").allInnerTexts();
  const NAME = "acme watch";
  const fitsWidth = async (what) => {
    const overflow = await page.locator("#view-monitors .table-wrap").evaluateAll((ws) => ws.map((w) => w.scrollWidth - w.clientWidth));
    expect(overflow.every((o) => o <= 1), what + ": a table scrolls sideways at 1280px: " + overflow);
  };

  await step("sign in; the first visit makes the account's first key", async () => {
    await page.goto(base + "/console/");
    await page.fill("#signin-token", token);
    await page.press("#signin-token", "Enter");
    await page.locator("#revealed-key").waitFor();
    await page.click("#key-reveal button.secondary");
  });

  let watcher;
  await step("keys to choose from: one more active key, and a revoked one the form must not offer", async () => {
    await page.click("#nav a[data-view=keys]");
    for (const name of ["watcher", "retired"]) {
      await page.fill("#new-key-name", name);
      await page.click("#create-key-form button[type=submit]");
      await keyRow(name).waitFor();
      await page.click("#key-reveal button.secondary");
    }
    await keyRow("retired").getByRole("button", { name: /^Revoke key retired/ }).click();
    await keyRow("retired").locator(".badge", { hasText: "revoked" }).waitFor();
    watcher = (await get("/console/keys")).json.items.find((k) => k.name === "watcher");
    expect(watcher && watcher.status === "active", "no watcher key");
  });

  await step("the Monitors section: none yet, and a key selector of the active keys", async () => {
    await page.click("#nav a[data-view=monitors]");
    await page.locator("#view-monitors").waitFor();
    await page.locator("#monitors-count", { hasText: "(0 of 50)" }).waitFor();
    expect(/No monitors yet/.test(await page.locator("#monitors-table tbody").innerText()), "no empty state");
    expect(await page.title() === "Monitors · Meridian console", "title " + await page.title());
    const options = await page.locator("#monitor-key option").allInnerTexts();
    expect(options.length === 2 && options.some((o) => o.startsWith("watcher (" + watcher.prefix)) && !options.some((o) => /retired/.test(o)),
      "key options " + JSON.stringify(options));
    await shot("01-monitors-empty");
  });

  await step("parameters that are not JSON: said next to the parameters, nothing sent", async () => {
    await page.selectOption("#monitor-key", watcher.id);
    await page.fill("#monitor-platform", "company_registry");
    await page.fill("#monitor-endpoint", "search");
    await page.fill("#monitor-params", "{\"query\": acme}");
    await page.fill("#monitor-interval", "60");
    await page.fill("#monitor-name", NAME);
    await submit();
    await errorOf("monitor-params").waitFor();
    expect(/not valid JSON/.test(await errorOf("monitor-params").innerText()), "params error " + await errorOf("monitor-params").innerText());
    expect(await page.getAttribute("#monitor-params", "aria-invalid") === "true", "params not marked invalid");
    expect(await page.evaluate(() => document.activeElement.id) === "monitor-params", "focus is not on the parameters");
    expect(creates === 0, "the page sent a monitor with broken parameters");
    await shot("02-refused-params-json");
  });

  await step("an unknown endpoint: the API's refusal next to the endpoint, with its request id", async () => {
    await page.fill("#monitor-params", "{\"query\": \"acme\"}");
    expect(await errorOf("monitor-params").isHidden(), "editing the parameters left their error");
    await page.fill("#monitor-endpoint", "nope");
    await submit();
    await errorOf("monitor-endpoint").waitFor();
    const text = await errorOf("monitor-endpoint").innerText();
    expect(/company_registry\/nope is not a data operation/.test(text) && /\(request req_[0-9a-f]+\)/.test(text), "endpoint error " + text);
    expect(JSON.stringify(await visibleErrors()) === JSON.stringify(["monitor-endpoint-error"]), "errors shown " + await visibleErrors());
    expect(await page.getAttribute("#monitor-endpoint", "aria-invalid") === "true", "endpoint not marked invalid");
    expect(await page.locator("#alert").isHidden(), "a field's refusal also raised the alert");
    await shot("03-refused-endpoint");
  });

  await step("the operation's own validation: a missing parameter is refused next to the parameters", async () => {
    await page.fill("#monitor-endpoint", "search");
    await page.fill("#monitor-params", "{}");
    await submit();
    await errorOf("monitor-params").waitFor();
    const text = await errorOf("monitor-params").innerText();
    expect(/query/.test(text) && /^params: /.test(text), "params error " + text);
    expect(JSON.stringify(await visibleErrors()) === JSON.stringify(["monitor-params-error"]), "errors shown " + await visibleErrors());
  });

  await step("an interval out of range is refused next to Every", async () => {
    await page.fill("#monitor-params", "{\"query\": \"acme\"}");
    await page.fill("#monitor-interval", "1");
    await submit();
    await errorOf("monitor-interval").waitFor();
    expect(/5 to 10080/.test(await errorOf("monitor-interval").innerText()), "interval error");
    expect((await get("/console/monitors")).json.count === 0, "a refused monitor was stored");
  });

  let monitor;
  await step("create the monitor through the form: listed as the API has it", async () => {
    await page.fill("#monitor-interval", "60");
    await submit();
    await monitorRow(NAME).waitFor();
    expect(await visibleErrors().then((e) => e.length) === 0, "errors stayed");
    expect(/created/.test(await page.locator("#create-monitor-status").innerText()), "no confirmation");
    expect(await page.inputValue("#monitor-name") === "" && await page.inputValue("#monitor-params") === "", "the form kept its values");
    const r = await get("/console/monitors");
    expect(r.status === 200 && r.json.count === 1, "list " + JSON.stringify(r.json));
    monitor = r.json.items[0];
    expect(monitor.name === NAME && monitor.key_id === watcher.id && monitor.state === "active" && monitor.interval_minutes === 60 &&
      monitor.params.query === "acme", "stored " + JSON.stringify(monitor));
    const cells = await monitorRow(NAME).locator("td").allInnerTexts();
    expect(await monitorRow(NAME).getAttribute("data-monitor-id") === monitor.id, "row id");
    expect(cells[0] === NAME + "\nkey " + watcher.prefix + "…" + watcher.last4 + " watcher" && cells[1] === "/v1/company_registry/search" && cells[2] === Object.keys(monitor.params).sort().map((n) => n + "=" + monitor.params[n]).join("\n") && /^query=acme$/m.test(cells[2]) && cells[3] === "60 min" &&
      cells[4] === "active", "row " + JSON.stringify(cells));
    await page.locator("#monitors-count", { hasText: "(1 of 50)" }).waitFor();
  });

  await step("the local scheduler's first run shows as the last run", async () => {
    for (let i = 0; ; i++) {
      await page.click("#monitors-refresh");
      await page.waitForTimeout(250);
      if (/succeeded/.test(await monitorRow(NAME).locator("td").nth(5).innerText())) break;
      expect(i < 40, "no run after 10 s: " + await monitorRow(NAME).locator("td").nth(5).innerText());
    }
    await shot("04-monitor-listed");
  });

  await step("pause: the state with its reason; the API agrees", async () => {
    await monitorRow(NAME).getByRole("button", { name: "Pause monitor " + NAME }).click();
    await page.locator("#monitors-table tr[data-state=paused]").waitFor();
    const state = await monitorRow(NAME).locator("td").nth(4).innerText();
    expect(/paused/.test(state) && /Paused by the account/.test(state), "state " + state);
    const m = (await get("/console/monitors")).json.items[0];
    expect(m.state === "paused" && m.paused_reason, "API " + JSON.stringify(m));
    await fitsWidth("a paused monitor");
    await shot("05-monitor-paused");
  });

  await step("resume: active again", async () => {
    await monitorRow(NAME).getByRole("button", { name: "Resume monitor " + NAME }).click();
    await page.locator("#monitors-table tr[data-state=active]").waitFor();
    expect((await get("/console/monitors")).json.items[0].state === "active", "API still paused");
  });

  let all;
  await step("six more runs from the local scheduler; the source changes at the fourth", async () => {
    const r = await fetch(hook + "/deliver?monitor=" + encodeURIComponent(monitor.id) + "&runs=6&change_at=4", { method: "POST" });
    const text = await r.text();
    expect(r.ok, "deliver: " + r.status + " " + text);
    all = JSON.parse(text).runs;
    expect(all.length === 7, "runs " + all);
  });

  await step("its runs, newest first: status, HTTP status, credits, request id, changes", async () => {
    await monitorRow(NAME).getByRole("button", { name: "Show runs of monitor " + NAME }).click();
    await page.locator("#runs-panel").waitFor();
    expect(await page.locator("#runs-title").innerText() === "Runs of " + NAME, "runs title");
    // Focus moves to the runs once they are listed.
    await page.waitForFunction(() => document.activeElement.id === "runs-title");
    await page.selectOption("#runs-limit", "5");
    await page.waitForFunction(() => document.querySelectorAll("#runs-table tr[data-run-id]").length === 5);
    const ids = await runIds();
    expect(JSON.stringify(ids) === JSON.stringify(all.slice(0, 5)), "page 1 " + ids + " want " + all.slice(0, 5));
    const api = (await get("/console/monitors/" + monitor.id + "/runs?limit=100")).json.items;
    for (let i = 0; i < 5; i++) {
      const c = await runCells(i);
      const run = api[i];
      expect(run.id === ids[i] && c[1] === "succeeded" && c[2] === "200" && c[3] === "1" && c[4] === run.request_id && /^req_/.test(c[4]),
        "row " + i + " " + JSON.stringify(c) + " api " + JSON.stringify(run));
    }
    // Newest first: runs 6 and 5 saw what run 4 saw; run 4 saw the change.
    expect((await runCells(0))[5] === "no change" && (await runCells(1))[5] === "no change", "unchanged runs");
    const change = (await runCells(2))[5];
    // The source renamed its first company and dropped its last.
    expect(/^items: 1 removed, 1 changed \(name\)\nfields: count, total_results$/.test(change), "changes of the fourth run: " + JSON.stringify(change));
    expect((await runCells(3))[5] === "no change", "run 3");
    expect(!(await page.locator("#runs-more").isHidden()) && /5 runs shown; older runs remain/.test(await page.locator("#runs-shown").innerText()), "no more button");
    await fitsWidth("runs");
    await shot("06-runs");
  });

  await step("more runs: the next page by cursor", async () => {
    await page.click("#runs-more");
    await page.waitForFunction(() => document.querySelectorAll("#runs-table tr[data-run-id]").length === 7);
    expect(JSON.stringify(await runIds()) === JSON.stringify(all), "all runs " + await runIds());
    expect(await page.locator("#runs-more").isHidden(), "a more button with no more runs");
    expect((await runCells(6))[5] === "nothing to compare with", "the first run: " + (await runCells(6))[5]);
    expect(/^7 runs shown\.$/.test(await page.locator("#runs-shown").innerText()), "count shown");
  });

  await step("a run's request id opens its ledger entry: the one-credit debit", async () => {
    const requestId = (await runCells(0))[4];
    await page.locator("#runs-table tr[data-run-id]").first().getByRole("button", { name: "Show request " + requestId + " in the ledger" }).click();
    await page.locator("#view-ledger").waitFor();
    await page.locator("#ledger-page", { hasText: requestId }).waitFor();
    const types = await page.locator("#ledger-table tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.type + " " + r.children[2].textContent));
    expect(JSON.stringify(types) === JSON.stringify(["debit -1"]), "entries " + types);
    await shot("07-run-in-ledger");
    await page.click("#ledger-clear");
    await page.click("#nav a[data-view=monitors]");
    await monitorRow(NAME).waitFor();
  });

  await step("a revoked key: the next run is refused and pauses the monitor, saying why", async () => {
    await page.click("#nav a[data-view=keys]");
    await keyRow("watcher").getByRole("button", { name: /^Revoke key watcher/ }).click();
    await keyRow("watcher").locator(".badge", { hasText: "revoked" }).waitFor();
    const r = await fetch(hook + "/deliver?monitor=" + encodeURIComponent(monitor.id) + "&runs=1&from=7", { method: "POST" });
    const text = await r.text();
    expect(r.ok, "deliver: " + r.status + " " + text);
    const refused = JSON.parse(text).runs[0];
    await page.click("#nav a[data-view=monitors]");
    await page.locator("#monitors-table tr[data-state=paused]").waitFor();
    const cells = await monitorRow(NAME).locator("td").allInnerTexts();
    expect(/revoked/.test(cells[0]), "the key is not shown revoked: " + cells[0]);
    expect(/paused/.test(cells[4]) && /key this monitor runs with is revoked or deleted/.test(cells[4]), "state " + cells[4]);
    expect(/refused/.test(cells[5]), "last run " + cells[5]);
    const m = (await get("/console/monitors")).json.items[0];
    expect(m.state === "paused" && m.paused_reason !== "user" && m.last_run_status === "refused", "API " + JSON.stringify(m));
    await page.click("#runs-refresh");
    await page.waitForFunction((id) => document.querySelector("#runs-table tr[data-run-id]").dataset.runId === id, refused);
    const c = await runCells(0);
    expect(c[1] === "refused" && c[2] === "401" && /^UNAUTHORIZED: ./.test(c[5]), "refused run " + JSON.stringify(c));
    expect(await monitorRow(NAME).getByRole("button", { name: "Resume monitor " + NAME }).count() === 1, "no resume button");
    await fitsWidth("a refused run");
    await shot("08-key-revoked");
  });

  await step("readable at a phone's width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(100);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow <= 1, "monitors scroll sideways by " + overflow + "px at 390px");
    await shot("09-phone-monitors");
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await step("delete after confirming: it leaves the list, its runs close", async () => {
    await monitorRow(NAME).getByRole("button", { name: "Delete monitor " + NAME }).click();
    await page.locator("#monitor-delete-dialog").waitFor();
    expect(/acme watch/.test(await page.locator("#monitor-delete-which").innerText()), "the dialog names another monitor");
    await page.click("#monitor-delete-cancel");
    expect(await monitorRow(NAME).count() === 1, "cancel deleted the monitor");
    await monitorRow(NAME).getByRole("button", { name: "Delete monitor " + NAME }).click();
    await page.click("#monitor-delete-confirm");
    await monitorRow(NAME).waitFor({ state: "detached" });
    expect(await page.locator("#runs-panel").isHidden(), "the deleted monitor's runs stayed open");
    expect((await get("/console/monitors")).json.count === 0, "the API still lists it");
    expect((await get("/console/monitors/" + monitor.id + "/runs")).status === 404, "its runs still answer");
    await page.locator("#monitors-count", { hasText: "(0 of 50)" }).waitFor();
    await shot("10-monitor-deleted");
  });

  await step("sign out clears the section", async () => {
    await page.click("#sign-out");
    await page.locator("#view-signin").waitFor();
    expect(await page.locator("#monitors-table tbody tr").count() === 0 && await page.locator("#monitor-key option").count() === 0,
      "the monitors stayed in the page");
  });

  await step("no script error and no blocked resource", async () => {
    expect(pageErrors.filter((e) => !/status of 4\d\d/.test(e)).length === 0, pageErrors.join("\n"));
  });
});
