import type { Browser } from "playwright-core";
import { describe, expect, it } from "vitest";
import { openPage, serviceAndBrowser } from "../../console/tests/browser.js";
import { DOCS_CSP } from "../../src/transport/api-docs.js";
import type { TestService } from "../support/service.js";

/*
 * Issue 23: /docs is an API reference (Redoc's standalone bundle, served from the npm package,
 * no CDN) over /openapi.json, under a CSP with no inline script. Checked in Chromium: the
 * operations render, nothing is fetched from another origin and nothing breaks the CSP.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

describe("/docs over HTTP", () => {
  it("answers the page and the bundle under the CSP, gzipped when asked", async () => {
    const page = await fetch(`${svc.baseUrl}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toBe(DOCS_CSP);
    expect(DOCS_CSP).toContain("script-src 'self';");
    const html = await page.text();
    expect(html).toContain('<redoc spec-url="/openapi.json"');
    expect(html).not.toMatch(/<script>|https?:\/\//);
    const bundle = await fetch(`${svc.baseUrl}/docs/redoc.standalone.js`, { headers: { "accept-encoding": "gzip" } });
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(bundle.headers.get("content-encoding")).toBe("gzip");
    expect((await bundle.text()).length).toBeGreaterThan(500_000);
  });

  it("refuses other files and methods", async () => {
    expect((await fetch(`${svc.baseUrl}/docs/../package.json`)).status).toBe(404);
    expect((await fetch(`${svc.baseUrl}/docs/redoc.js`)).status).toBe(404);
    expect((await fetch(`${svc.baseUrl}/docs`, { method: "POST" })).status).toBe(405);
    const slash = await fetch(`${svc.baseUrl}/docs/`, { redirect: "manual" });
    expect(slash.status).toBe(308);
    expect(slash.headers.get("location")).toBe("/docs");
  });
});

describe("/docs in Chromium", () => {
  it("renders the operations from /openapi.json, loading nothing from elsewhere and breaking no CSP rule but Redoc's logo", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const { page, problems } = await openPage(context);
      const requested: string[] = [];
      const answered: string[] = [];
      page.on("request", (req) => requested.push(req.url()));
      page.on("response", (res) => answered.push(res.url()));
      await page.goto(`${svc.baseUrl}/docs`);
      // An operation's summary (the method name in words) and its description (the proto comment).
      const operation = page.locator("h2", { hasText: "Submit intent" });
      await operation.first().waitFor({ state: "visible", timeout: 30_000 });
      await expect(page.getByText("HUMAN_REVIEW alike").first().isVisible()).resolves.toBe(true);
      await page.getByText("Create sandbox organization").first().waitFor({ state: "attached" });
      expect(await page.title()).toBe("Mandate API reference");
      expect(requested).toContain(`${svc.baseUrl}/openapi.json`);
      // Redoc's side menu always shows Redocly's logo from their CDN; the CSP (img-src 'self')
      // stops it before any connection, and Redoc hides the image when it fails.
      const LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg";
      const elsewhere = (url: string) => !url.startsWith(svc.baseUrl) && !url.startsWith("blob:") && !url.startsWith("data:");
      expect(requested.filter(elsewhere).filter((url) => url !== LOGO)).toEqual([]);
      expect(answered.filter(elsewhere)).toEqual([]);
      expect(problems.errors.filter((e) => !(e.includes(LOGO) && e.includes("Content Security Policy")))).toEqual([]);
      expect(problems.httpStatuses).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
