import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, expect } from "vitest";
import { startService, type TestService } from "../../test/support/service.js";

/** Debian's Chromium (scripts/setup.sh installs it); playwright-core never downloads one. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Screenshots of every page the journeys visit (gitignored). */
export const OUTPUT_DIR = fileURLToPath(new URL("../test-output/", import.meta.url));

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** Headless Chromium with the flags this machine's closed network needs (no background connections). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/**
 * One service and one Chromium for a test file: started together before its tests, closed after
 * them. `use` receives both once started (a file keeps them in its own variables).
 */
export function serviceAndBrowser(use: (svc: TestService, browser: Browser) => void): void {
  let svc: TestService | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    [svc, browser] = await Promise.all([startService(), launchChromium()]);
    use(svc, browser);
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.close();
  });
}

/** What a page reported that a user would call a fault. */
export interface PageProblems {
  /** console.error/console.warn messages, uncaught exceptions, CSP violations. */
  errors: string[];
  /** "Failed to load resource: … status of N": Chromium's own line for each non-2xx answer. */
  httpStatuses: string[];
}

/**
 * A page whose console and uncaught errors are collected. Chromium logs every non-2xx answer
 * as "Failed to load resource"; those are kept apart, because the console shows API refusals
 * on purpose (a Connect error is a 4xx), and the journeys check which ones happened.
 */
export async function openPage(context: BrowserContext): Promise<{ page: Page; problems: PageProblems }> {
  const page = await context.newPage();
  const problems: PageProblems = { errors: [], httpStatuses: [] };
  page.on("console", (msg) => {
    if (msg.type() !== "error" && msg.type() !== "warning") return;
    const text = msg.text();
    if (/^Failed to load resource: the server responded with a status of \d+/.test(text)) problems.httpStatuses.push(`${text} ${msg.location().url}`);
    else problems.errors.push(`${msg.type()}: ${text}`);
  });
  page.on("pageerror", (err) => problems.errors.push(`uncaught: ${err.message}`));
  return { page, problems };
}

/** One axe-core violation, as the journeys report it. */
export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core in the page (evaluated through the DevTools protocol, which the console's CSP
 * does not apply to, so the CSP stays on) and returns the serious and critical violations.
 */
export async function seriousViolations(page: Page): Promise<Violation[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, o: object): Promise<{ violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(" ")) }));
  });
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/** Saves a full-page screenshot as OUTPUT_DIR/<run>/<name>.png. */
export async function screenshot(page: Page, run: string, name: string): Promise<string> {
  const dir = path.join(OUTPUT_DIR, run);
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Presses Tab until `target` has the focus (at most `max` times): the keyboard reaches it. */
export async function tabTo(page: Page, target: Locator, max = 40): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    if (await target.evaluate((el) => el === document.activeElement)) return;
  }
  throw new Error(`${target} is not reached by ${max} presses of Tab`);
}

/** Screenshot, then axe-core: no serious or critical violation on any page. */
export async function checkPage(page: Page, run: string, name: string): Promise<void> {
  await screenshot(page, run, name);
  expect(await seriousViolations(page), `${name}: axe-core found serious or critical violations`).toEqual([]);
}

/** No script error, warning or CSP violation; HTTP refusals only of the kinds the journey provoked. */
export function expectCleanConsole(problems: PageProblems, allowedStatuses: number[]): void {
  expect(problems.errors, "console errors or warnings").toEqual([]);
  for (const line of problems.httpStatuses) expect(allowedStatuses, line).toContain(Number(/status of (\d+)/.exec(line)![1]));
}

/** Signs in with `apiKey` from the sign-in page; resolves on the organization page. */
export async function signIn(page: Page, apiKey: string): Promise<void> {
  await page.goto("/console/sign-in");
  await page.getByLabel("API key").fill(apiKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Organization", exact: true }).waitFor();
}

export async function signOut(page: Page): Promise<void> {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in" }).waitFor();
}

/** Follows a link of the main navigation, as a user would (no page load). */
export function navTo(page: Page, name: string): Promise<void> {
  return page.getByRole("navigation", { name: "Main" }).getByRole("link", { name }).click();
}

/**
 * Sandbox sign-up from the sign-up page: the key is shown once; it is read from the page and
 * copied with its button (the context must grant clipboard-read and clipboard-write).
 */
export async function signUpSandbox(page: Page, email: string): Promise<{ apiKey: string; organizationId: string }> {
  await page.getByLabel("Email").fill(email);
  await page.getByRole("button", { name: "Create sandbox" }).click();
  const apiKey = await copySecret(page, "API key");
  const organizationId = (await page.getByTestId("organization-id").textContent())!;
  return { apiKey, organizationId };
}

/**
 * A key shown once (components/secret.tsx, labelled `label`), copied with its button: what the
 * clipboard then holds, checked to be what the page shows (the context must grant clipboard-read
 * and clipboard-write).
 */
export async function copySecret(page: Page, label: string): Promise<string> {
  const box = page.getByLabel(label, { exact: true });
  await box.waitFor();
  const shown = await box.inputValue();
  expect(shown).toMatch(/^mk_/);
  await page.getByRole("button", { name: "Copy" }).click();
  await page.getByText("Copied to the clipboard.").waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  expect(copied).toBe(shown);
  return copied;
}
