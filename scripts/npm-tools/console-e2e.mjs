// End-to-end test of the console page in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core; nothing downloads a
// browser). It opens a fresh account through the operator API, then does
// what a customer does in the page and checks each step against the API
// itself. Screenshots of every view go to OUT_DIR.
// Usage: CHROMIUM_PATH=/usr/bin/chromium MERIDIAN_ADMIN_TOKEN=… node console-e2e.mjs BASE_URL OUT_DIR
// Prints one JSON line {"steps":[…],"screenshots":[…]} and exits 1 at the
// first failed step (named in "failed").
import { runE2E, expect, fail } from "./browser-lib.mjs";

const [base, outDir] = process.argv.slice(2);
const adminToken = process.env.MERIDIAN_ADMIN_TOKEN;
if (!base || !outDir || !adminToken) {
  console.error("usage: MERIDIAN_ADMIN_TOKEN=… console-e2e.mjs BASE_URL OUT_DIR");
  process.exit(2);
}

async function api(method, path, { key, body, headers } = {}) {
  const h = { ...(headers || {}) };
  if (key) h["x-api-key"] = key;
  if (body !== undefined) h["content-type"] = "application/json";
  const res = await fetch(base + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  let json = null;
  try { json = await res.json(); } catch (_) { json = null; }
  return { status: res.status, json, requestId: res.headers.get("x-request-id") };
}

await runE2E(outDir, 15000, async ({ page, context, step, shot, pageErrors }) => {
  const alertText = async () => (await page.locator("#alert").isVisible()) ? await page.locator("#alert").innerText() : "";
  const expectAlert = async (what, re) => {
    await page.locator("#alert").waitFor({ state: "visible" });
    const text = await alertText();
    expect(re.test(text), `${what}: the alert says ${JSON.stringify(text)}`);
    expect(/Request id:\s*req_[0-9a-f]+/.test(text), `${what}: the alert names no request id: ${JSON.stringify(text)}`);
    await page.click("#alert-close");
  };
  const keyRow = (name) => page.locator("#keys-table tbody tr", { has: page.locator("td:first-child", { hasText: new RegExp("^" + name + "$") }) });

  let consoleToken;
  await step("open a fresh account (operator API)", async () => {
    const r = await api("POST", "/admin/accounts", { body: { credits: 100 }, headers: { "x-admin-token": adminToken } });
    expect(r.status === 201 && r.json.console_token, `admin: ${r.status} ${JSON.stringify(r.json)}`);
    consoleToken = r.json.console_token;
  });

  await step("the sign-in form, and a wrong token's error with its request id", async () => {
    await page.goto(base + "/console/");
    await page.locator("#signin-form").waitFor();
    await shot("01-sign-in");
    await page.fill("#signin-token", "mc_" + "x".repeat(43));
    await page.press("#signin-token", "Enter");
    await expectAlert("wrong token", /not valid/);
  });

  await step("sign in with the keyboard; the token lives only in an HttpOnly SameSite=Strict cookie", async () => {
    await page.fill("#signin-token", "");
    await page.focus("#signin-token");
    await page.keyboard.type(consoleToken);
    await page.keyboard.press("Enter");
    await page.locator("#view-overview").waitFor();
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === "meridian_console");
    expect(session && session.httpOnly && session.sameSite === "Strict" && session.path === "/console", `cookie ${JSON.stringify(session)}`);
    const stored = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage }, c: document.cookie, u: location.href }));
    expect(!stored.includes(consoleToken) && !stored.includes("mc_"), "the token is readable by the page: " + stored);
  });

  let firstKey;
  await step("the first visit creates one key and shows it once", async () => {
    await page.locator("#revealed-key").waitFor();
    firstKey = (await page.locator("#revealed-key").innerText()).trim();
    expect(/^mn_[A-Za-z0-9_-]{43}$/.test(firstKey), "first key " + firstKey);
    expect(/you will not see it again/i.test(await page.locator("#key-reveal").innerText()), "no warning that the key is shown once");
    expect((await page.locator("#ov-balance").innerText()) === "100", "balance " + await page.locator("#ov-balance").innerText());
    await shot("02-overview-first-key");
    const r = await api("GET", "/v1/credits/balance", { key: firstKey });
    expect(r.status === 200 && r.json.data.credits_remaining === 100, `first key: ${r.status} ${JSON.stringify(r.json)}`);
    await page.reload();
    await page.locator("#ov-keys").filter({ hasText: "1 active key" }).waitFor();
    expect(await page.locator("#revealed-key").count() === 0, "the first key was shown again");
    expect(!(await page.content()).includes(firstKey), "the first key is in the page again");
  });

  let newKey;
  await step("create a key, copy it, read it once", async () => {
    await page.click('#nav a[data-view="keys"]');
    await page.locator("#view-keys").waitFor();
    await page.fill("#new-key-name", "e2e");
    await page.click('#create-key-form button[type="submit"]');
    await page.locator("#revealed-key").waitFor();
    newKey = (await page.locator("#revealed-key").innerText()).trim();
    expect(/^mn_[A-Za-z0-9_-]{43}$/.test(newKey) && newKey !== firstKey, "new key " + newKey);
    await keyRow("e2e").waitFor();
    expect((await keyRow("e2e").innerText()).includes(newKey.slice(0, 7)), "the row shows no prefix");
    await page.click("#copy-key");
    await page.locator("#key-reveal").filter({ hasText: "Copied." }).waitFor();
    await shot("03-keys-new-key");
    await page.click("#key-reveal button.secondary");
    expect(await page.locator("#revealed-key").count() === 0, "the reveal stayed");
    expect(!(await page.content()).includes(newKey), "the full key is still in the page");
    await page.reload();
    await keyRow("e2e").waitFor();
    expect(!(await page.content()).includes(newKey), "the full key came back after a reload");
  });

  const calls = [];
  await step("use the key: paid calls land in the ledger", async () => {
    // "sample malformed" is the replay fixture of a source answering a
    // broken body: a failure, refunded.
    for (const q of ["acme", "globex", "initech", "umbrella", "hooli", "sample malformed"]) {
      const r = await api("GET", "/v1/company_registry/search?query=" + q, { key: newKey });
      expect(r.requestId && r.requestId.startsWith("req_"), "no request id");
      calls.push(r);
    }
    expect(calls.filter((r) => r.status === 200).length === 5 && calls[5].status === 502,
      "paid calls answered " + calls.map((c) => c.status));
  });

  await step("revoke the key: a call with it answers 401 invalid_api_key", async () => {
    await keyRow("e2e").getByRole("button", { name: /^Revoke key e2e/ }).click();
    await keyRow("e2e").locator(".badge", { hasText: "revoked" }).waitFor();
    const r = await api("GET", "/v1/credits/balance", { key: newKey });
    expect(r.status === 401 && r.json.error.type === "UNAUTHORIZED" && r.json.error.details.reason === "invalid_api_key",
      `revoked key: ${r.status} ${JSON.stringify(r.json)}`);
    await shot("04-keys-revoked");
  });

  await step("reactivate it: it authenticates again", async () => {
    await keyRow("e2e").getByRole("button", { name: /^Reactivate key e2e/ }).click();
    await keyRow("e2e").locator(".badge", { hasText: "active" }).waitFor();
    const r = await api("GET", "/v1/credits/balance", { key: newKey });
    expect(r.status === 200, `reactivated key: ${r.status}`);
  });

  await step("set a credit limit: a paid call is refused 402 KEY_LIMIT_EXCEEDED", async () => {
    await keyRow("e2e").getByRole("button", { name: /^Edit key e2e/ }).click();
    await page.locator("#edit-dialog").waitFor();
    await page.fill("#edit-limit", "0");
    await page.click("#edit-save");
    await keyRow("e2e").locator("td:nth-child(4)", { hasText: /^0$/ }).waitFor();
    const r = await api("GET", "/v1/company_registry/search?query=capped", { key: newKey });
    expect(r.status === 402 && r.json.error.type === "KEY_LIMIT_EXCEEDED" && r.json.error.details.credit_limit === 0,
      `capped key: ${r.status} ${JSON.stringify(r.json)}`);
  });

  await step("the five-active-keys rule is explained when it refuses", async () => {
    for (const name of ["k3", "k4", "k5"]) {
      await page.fill("#new-key-name", name);
      await page.click('#create-key-form button[type="submit"]');
      await keyRow(name).waitFor();
      await page.click("#key-reveal button.secondary");
    }
    await page.fill("#new-key-name", "k6");
    await page.click('#create-key-form button[type="submit"]');
    await page.locator("#alert").waitFor({ state: "visible" });
    const text = await alertText();
    expect(/at most 5 active keys/.test(text) && /revoked and deleted keys do not count/.test(text) && /Request id:\s*req_/.test(text),
      "refusal: " + text);
    await shot("05-keys-five-active");
    await page.click("#alert-close");
    expect(await keyRow("k6").count() === 0, "a sixth active key was listed");
  });

  await step("delete a key after confirming: it leaves the list", async () => {
    await keyRow("k5").getByRole("button", { name: /^Delete key k5/ }).click();
    await page.locator("#delete-dialog").waitFor();
    await page.click("#delete-cancel");
    expect(await keyRow("k5").count() === 1, "cancel deleted the key");
    await keyRow("k5").getByRole("button", { name: /^Delete key k5/ }).click();
    await page.click("#delete-confirm");
    await keyRow("k5").waitFor({ state: "detached" });
    await shot("06-keys");
  });

  await step("page the ledger with the API's cursor", async () => {
    await page.click('#nav a[data-view="ledger"]');
    await page.locator("#view-ledger").waitFor();
    await page.selectOption("#ledger-limit", "5");
    await page.locator("#ledger-page", { hasText: "Page 1" }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll("#ledger-table tbody tr[data-entry-id]").length === 5);
    const first = await page.locator("#ledger-table tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.entryId));
    await shot("07-ledger");
    await page.click("#ledger-older");
    await page.locator("#ledger-page", { hasText: "Page 2" }).waitFor();
    const second = await page.locator("#ledger-table tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.entryId));
    expect(second.length > 0 && second.every((id) => !first.includes(id)), `pages overlap: ${first} / ${second}`);
    await page.click("#ledger-newer");
    await page.locator("#ledger-page", { hasText: "Page 1" }).waitFor();
    const again = await page.locator("#ledger-table tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.entryId));
    expect(JSON.stringify(again) === JSON.stringify(first), "page 1 changed");
  });

  await step("filter the ledger by request_id", async () => {
    const target = calls[0];
    await page.fill("#ledger-request-id", target.requestId);
    await page.click('#ledger-filter button[type="submit"]');
    await page.locator("#ledger-page", { hasText: target.requestId }).waitFor();
    const ids = await page.locator("#ledger-table tbody[data-request-id]").evaluateAll((bs) => bs.map((b) => b.dataset.requestId));
    expect(ids.length === 1 && ids[0] === target.requestId, "filtered groups " + ids);
    const types = await page.locator("#ledger-table tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.type));
    expect(types.join() === "debit", `entries of a success: ${types}`);
    await shot("08-ledger-filtered");
    // A failure's debit and refund sit together, netting 0.
    const failed = calls[5];
    await page.fill("#ledger-request-id", failed.requestId);
    await page.click('#ledger-filter button[type="submit"]');
    await page.locator("#ledger-page", { hasText: failed.requestId }).waitFor();
    const pair = page.locator(`#ledger-table tbody.pair[data-request-id="${failed.requestId}"]`);
    await pair.waitFor();
    const pairTypes = await pair.locator("tr[data-entry-id]").evaluateAll((rs) => rs.map((r) => r.dataset.type));
    expect(pairTypes.join() === "refund,debit" && /net 0/.test(await pair.innerText()), "the failure's entries: " + pairTypes);
    await shot("08-ledger-refund-pair");
    await page.click("#ledger-clear");
    await page.locator("#ledger-page", { hasText: /^Page 1$/ }).waitFor();
  });

  await step("usage: charts of calls and credits per day and per endpoint", async () => {
    await page.click('#nav a[data-view="usage"]');
    // Usage events are counted by the worker moments after each call.
    for (let i = 0; ; i++) {
      await page.locator("#us-calls").waitFor();
      const calls = Number((await page.locator("#us-calls").innerText()).replace(/,/g, ""));
      if (calls > 0) break;
      expect(i < 20, "no usage counted");
      await page.waitForTimeout(500);
      await page.evaluate(() => window.dispatchEvent(new HashChangeEvent("hashchange")));
    }
    expect(await page.locator("#chart-calls svg rect.bar").count() === 30, "the calls chart has no 30 days");
    expect(await page.locator("#chart-credits svg").count() === 1 && await page.locator("#chart-endpoints svg rect.bar").count() > 0, "charts missing");
    expect((await page.locator("#usage-table").innerText()).includes("/v1/company_registry/search"), "endpoint missing from the table");
    await shot("09-usage");
  });

  await step("status of every platform", async () => {
    await page.click('#nav a[data-view="status"]');
    await page.locator("#status-list > li").first().waitFor();
    const api200 = await api("GET", "/v1/status", { key: firstKey });
    const platforms = api200.json.data.platforms;
    expect(await page.locator("#status-list > li").count() === platforms.length, "platforms differ from /v1/status");
    // Each card shows the canary's last check beside the live figures.
    const checked = platforms.filter((p) => p.canary);
    expect(checked.length > 0, "no platform has a canary result in /v1/status");
    for (const p of platforms) {
      const card = page.locator("#status-list > li", { has: page.locator(".platform span", { hasText: new RegExp("^" + p.platform + "$") }) });
      const text = await card.locator(".canary").innerText();
      const want = p.canary ? p.canary.state.replace("_", " ") : "not checked yet";
      expect(text.includes(want), `${p.platform}: canary line "${text}", want "${want}"`);
    }
    const drifting = platforms.find((p) => p.platform === "code_host");
    expect(drifting && drifting.canary && drifting.canary.state === "drifting", "code_host is not drifting in /v1/status");
    const note = await page.locator("#status-list > li", { has: page.locator(".platform span", { hasText: /^code_host$/ }) }).locator(".canary-ops").innerText();
    expect(note.includes("code_host/profile: drifting") && note.includes("went null: location"), `the drifting operation's note: "${note}"`);
    await shot("10-status");
  });

  await step("readable at a phone's width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const view of ["overview", "keys", "ledger", "usage"]) {
      await page.click(`#nav a[data-view="${view}"]`);
      await page.locator("#view-" + view).waitFor();
      await page.waitForTimeout(100);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow <= 1, `${view} scrolls sideways by ${overflow}px at 390px`);
      await shot("11-phone-" + view);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await step("sign out: the session is gone", async () => {
    await page.click("#sign-out");
    await page.locator("#view-signin").waitFor();
    const cookies = await context.cookies();
    expect(!cookies.some((c) => c.name === "meridian_console"), "the session cookie stayed");
    const r = await page.evaluate(async () => (await fetch("/console/keys")).status);
    expect(r === 401, "after sign-out /console/keys answered " + r);
    await page.reload();
    await page.locator("#view-signin").waitFor();
    await shot("12-signed-out");
  });

  await step("no script error and no blocked resource on any page", async () => {
    expect(pageErrors.filter((e) => !/status of 4\d\d/.test(e)).length === 0, pageErrors.join("\n"));
  });
});
