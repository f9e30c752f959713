// What the console's browser scripts share: Debian's Chromium through
// playwright-core (nothing downloads a browser), named steps, screenshots,
// the page's script errors, and the one JSON line the Go tests read:
// {"steps":[…],"screenshots":[…],"page_errors":[…]}, plus "failed" and
// "error" naming the first failed step (the process then exits 1).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export const fail = (msg) => { throw new Error(msg); };
export const expect = (cond, msg) => { if (!cond) fail(msg); };

// runE2E opens a 1280×900 page whose actions wait at most timeout ms,
// runs body({page, context, step, shot, pageErrors}), prints the report and exits.
export async function runE2E(outDir, timeout, body) {
  mkdirSync(outDir, { recursive: true });
  const report = { steps: [], screenshots: [] };
  const pageErrors = [];
  const step = async (name, fn) => {
    try {
      await fn();
      report.steps.push(name);
    } catch (e) {
      report.failed = name;
      report.error = String(e && e.stack || e);
      throw e;
    }
  };
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  let exitCode = 0;
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(timeout);
    page.on("pageerror", (e) => pageErrors.push("page error: " + e.message));
    page.on("console", (m) => { if (m.type() === "error") pageErrors.push("console error: " + m.text()); });
    const shot = async (name) => {
      const path = join(outDir, name + ".png");
      await page.screenshot({ path, fullPage: true });
      report.screenshots.push(path);
    };
    await body({ page, context, step, shot, pageErrors });
  } catch (e) {
    exitCode = 1;
    if (!report.failed) { report.failed = "setup"; report.error = String(e && e.stack || e); }
  } finally {
    await browser.close();
  }
  report.page_errors = pageErrors;
  console.log(JSON.stringify(report));
  process.exit(exitCode);
}
