import { randomUUID } from "node:crypto";
import type { Browser } from "playwright-core";
import { describe, expect, it } from "vitest";
import { MandateClient, type AgentIdentity } from "@mandate/client";
import type { TestService } from "../../test/support/service.js";
import { checkPage, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signUpSandbox, tabTo } from "./browser.js";
import { activeAgent, publishVendorPayments } from "./vendor-payments.js";

/*
 * Issue 22, the console's first journeys, in Debian's Chromium against a real service: sandbox
 * sign-up in the browser; the organization's HUMAN_REVIEW-producing policy and authority graph
 * set up through the API (the console's policy and governance pages come later); an agent's
 * Intent sent through the TypeScript client appears in the review queue without a reload;
 * dual approval (the same key refused twice, a second key approving) resolves it, and the
 * decision shows RESOLVED with its approver. Every page is screenshotted (console/test-output/)
 * and checked by axe-core; the same journey runs at 1280×800 and at phone width. Operator mode
 * creates an organization and its first admin key.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

/**
 * Publishes, through the API, what makes vendor payments need a human: a rules policy deferring
 * to the authority graph, and a graph whose approval matrix asks one approval up to 5,000 USD
 * and two up to 20,000 (four-eyes: a second key approves what the sandbox key authored).
 */
async function setUpReviews(baseUrl: string, sandboxKey: string): Promise<{ agent: AgentIdentity; agentName: string; principalName: string; reviewer: { keyId: string; apiKey: string } }> {
  const admin = new MandateClient({ base_url: baseUrl, api_key: sandboxKey });
  const suffix = randomUUID().slice(0, 8);
  const principalName = `Pat Payables ${suffix}`;
  const [principal, approverKey, reviewerKey] = await Promise.all([
    admin.createPrincipal({ display_name: principalName, kind: "person", external_ref: `pat-${suffix}` }),
    admin.createApiKey("approver", ["POLICY_APPROVER"]),
    admin.createApiKey("second reviewer", ["REVIEWER", "DECISION_READ"]),
  ]);
  const approver = admin.withApiKey(approverKey.api_key);
  await publishVendorPayments(admin, approver, principal.external_ref, [
    [1_000, 0],
    [5_000, 1],
    [20_000, 2],
  ]);
  const agentName = `payables-bot-${suffix}`;
  const agent = await activeAgent(admin, agentName, principal.principal_id);
  return { agent, agentName, principalName, reviewer: { keyId: reviewerKey.key_id, apiKey: reviewerKey.api_key } };
}

/** The whole review journey at one viewport; `run` names its screenshot folder. */
async function reviewJourney(run: string, viewport: { width: number; height: number }): Promise<void> {
  const phone = viewport.width < 600;
  const context = await browser.newContext({ viewport, baseURL: svc.baseUrl, ...(phone && { isMobile: true, hasTouch: true }) });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: svc.baseUrl });
  const { page, problems } = await openPage(context);
  try {
    // Signed out, the console opens on sign-in.
    await page.goto("/");
    await page.waitForURL("**/console/sign-in");
    await expect.poll(() => page.getByRole("heading", { name: "Sign in" }).isVisible()).toBe(true);
    await checkPage(page, run, "01-sign-in");

    // Sandbox sign-up: a refusal shows the API's message and field, then the key is shown once.
    await page.getByRole("link", { name: "Create a sandbox organization" }).click();
    await page.getByRole("heading", { name: "Create a sandbox organization" }).waitFor();
    await checkPage(page, run, "02-sign-up");
    await page.getByLabel("Email").fill("not-an-email");
    await page.getByRole("button", { name: "Create sandbox" }).click();
    const refusal = page.getByRole("alert");
    await refusal.waitFor();
    expect(await refusal.textContent()).toMatch(/validation_failed[\s\S]*email/);
    await checkPage(page, run, "03-sign-up-refused");
    const { apiKey: sandboxKey, organizationId } = await signUpSandbox(page, `console-${randomUUID().slice(0, 8)}@example.com`);
    await checkPage(page, run, "04-sign-up-key");
    // The key never reaches a URL; it is in this tab's session storage.
    expect(page.url()).not.toContain(sandboxKey);

    // The organization and the key's permissions (a sandbox key holds all of them).
    await page.getByRole("button", { name: "Continue with this key" }).click();
    await page.getByRole("heading", { name: "Organization", exact: true }).waitFor();
    await expect.poll(() => page.getByTestId("organization-id").textContent()).toBe(organizationId);
    await page.locator('[data-permission="REVIEWER"]').waitFor();
    expect(await page.locator('[data-held="false"]').count()).toBe(0);
    expect(await page.evaluate(() => Object.values(sessionStorage).some((v) => v.includes("mk_")))).toBe(true);
    await checkPage(page, run, "05-organization");

    const { agent, agentName, principalName, reviewer } = await setUpReviews(svc.baseUrl, sandboxKey);

    // The queue, empty, then live: the Intent appears without a reload.
    await navTo(page, "Review queue");
    await page.getByRole("heading", { name: "Review queue" }).waitFor();
    await page.getByText("No decision is waiting for a human review.").waitFor();
    // The sandbox key holds EVENTS_READ: the queue follows the event stream.
    await expect.poll(() => page.getByTestId("live-mode").textContent()).toContain("event stream");
    await checkPage(page, run, "06-review-queue-empty");
    await page.evaluate(() => ((window as unknown as { journeyMarker: number }).journeyMarker = 1));
    const client = new MandateClient({ base_url: svc.baseUrl });
    const decision = await client.submitIntent(agent, { action: "vendor_payment", amount: 12_000, currency: "USD", counterparty: "ACME Corp" });
    expect(decision).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "requires_dual_approval", status: "PENDING" });
    const row = page.locator(`li[data-decision-id="${decision.decision_id}"]`);
    await row.waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => (window as unknown as { journeyMarker?: number }).journeyMarker)).toBe(1);
    await expect.poll(() => row.textContent()).toContain(principalName);
    const rowText = (await row.textContent())!;
    for (const fact of ["vendor_payment", "12,000 USD", "requires_dual_approval", agentName, "payments v1", "authority graph v1"]) expect(rowText).toContain(fact);
    await checkPage(page, run, "07-review-queue-pending");

    // The review: a note is required; the first approval is recorded; the same key is refused.
    await row.getByRole("link").click();
    await page.getByRole("heading", { name: `Decision ${decision.decision_id}` }).waitFor();
    await expect.poll(() => page.getByTestId("status").textContent()).toBe("PENDING");
    await checkPage(page, run, "08-review");
    await page.getByRole("button", { name: "Approve" }).click();
    await page.getByText("Write a note").waitFor();
    await page.getByLabel("Note (required)").fill("Invoice matches PO 4711.");
    await page.getByRole("button", { name: "Approve" }).click();
    const first = page.getByTestId("approval");
    await first.waitFor();
    const firstApprover = (await first.locator("code").textContent())!;
    expect(firstApprover).toMatch(/\S/);
    expect(firstApprover).not.toBe(reviewer.keyId);
    expect(await first.textContent()).toContain("Approved first by");
    expect(await page.getByTestId("status").textContent()).toBe("PENDING");
    // Four eyes, before the API would refuse it: the same key cannot approve again, and is told why.
    expect(await page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
    expect(await page.getByTestId("approve-reason").textContent()).toBe("Your approval is recorded; a second reviewer, with another key, must approve.");
    await checkPage(page, run, "09-review-same-key-disabled");

    // The second reviewer: a key with REVIEWER and DECISION_READ only, shown as such.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    // By keyboard alone: Tab to the field, type, Enter.
    await tabTo(page, page.getByLabel("API key"));
    await page.keyboard.type(reviewer.apiKey);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Organization", exact: true }).waitFor();
    await page.locator('[data-permission="REVIEWER"][data-held="true"]').waitFor();
    const held = await page.locator('[data-held="true"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-permission")));
    expect(held.sort()).toEqual(["DECISION_READ", "REVIEWER"]);
    await checkPage(page, run, "10-organization-reviewer");
    // Without EVENTS_READ the queue polls; the first approval shows who gave it.
    await navTo(page, "Review queue");
    await expect.poll(() => page.getByTestId("live-mode").textContent()).toContain("refreshed every");
    const pending = page.locator(`li[data-decision-id="${decision.decision_id}"]`);
    await expect.poll(() => pending.textContent()).toContain(`1 of 2 approvals, first by ${firstApprover}`);
    await checkPage(page, run, "11-review-queue-reviewer");
    await pending.getByRole("link").click();
    await page.getByTestId("approval").waitFor();
    // By keyboard alone again: the note, then Tab to Approve and Enter.
    await tabTo(page, page.getByLabel("Note (required)"));
    await page.keyboard.type("Second pair of eyes: fine.");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Approve");
    await page.keyboard.press("Enter");
    await page.getByTestId("resolution").waitFor();
    expect(await page.getByTestId("status").textContent()).toBe("RESOLVED");
    expect(await page.getByTestId("outcome").textContent()).toBe("HUMAN_REVIEW");
    expect(await page.getByTestId("resolution-value").textContent()).toBe("approved");
    expect(await page.getByTestId("resolved-by").textContent()).toBe(reviewer.keyId);
    await checkPage(page, run, "12-review-resolved");

    // The API agrees, and the queue no longer lists it.
    const stored = await new MandateClient({ base_url: svc.baseUrl, api_key: reviewer.apiKey }).getDecision(decision.decision_id);
    expect(stored).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: { resolution: "approved", resolved_by: reviewer.keyId } });
    await page.getByRole("link", { name: "← Review queue" }).click();
    await page.getByText("No decision is waiting for a human review.").waitFor();

    if (!phone) {
      // A single-approval review, rejected: the resolution says so and the outcome is unchanged.
      const small = await client.submitIntent(agent, { action: "vendor_payment", amount: 2_500, currency: "USD", counterparty: "ACME Corp" });
      expect(small).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "requires_approval" });
      const smallRow = page.locator(`li[data-decision-id="${small.decision_id}"]`);
      await smallRow.waitFor({ timeout: 30_000 });
      await smallRow.getByRole("link").click();
      await page.getByLabel("Note (required)").fill("Counterparty not on the vendor list.");
      await page.getByRole("button", { name: "Reject" }).click();
      await page.getByTestId("resolution").waitFor();
      expect(await page.getByTestId("resolution-value").textContent()).toBe("rejected");
      expect(await page.getByTestId("status").textContent()).toBe("RESOLVED");
      expect(await page.getByTestId("outcome").textContent()).toBe("HUMAN_REVIEW");
      await checkPage(page, run, "13-review-rejected");
    }

    // Connect answers INVALID_ARGUMENT with 400, PERMISSION_DENIED with 403, NOT_FOUND with 404: the
    // permission probes and the refusals above. Never a 5xx, a script error or a CSP violation.
    expectCleanConsole(problems, [400, 403, 404]);
  } finally {
    await context.close();
  }
}

describe("the console", () => {
  it("serves its pages under a CSP, with hashed assets cached for good", async () => {
    const index = await fetch(`${svc.baseUrl}/console/reviews`);
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("cache-control")).toBe("no-cache");
    expect(index.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await index.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const js = await fetch(svc.baseUrl + asset);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const root = await fetch(`${svc.baseUrl}/`, { redirect: "manual" });
    expect([root.status, root.headers.get("location")]).toEqual([302, "/console/"]);
  });

  it("at 1280×800: sandbox sign-up → an Intent in the live queue → dual approval → RESOLVED", async () => {
    await reviewJourney("desktop", DESKTOP);
  });

  it("at phone width: the same journey reaches the queue and approves", async () => {
    await reviewJourney("phone", PHONE);
  });

  it("a key is refused with the API's message; a key without DECISION_READ sees neither the queue nor its page", async () => {
    const org = await svc.newOrg();
    const admin = new MandateClient({ base_url: svc.baseUrl, api_key: org.apiKey });
    const limited = await admin.createApiKey("agents only", ["AGENT_ADMIN"]);
    const context = await browser.newContext({ viewport: DESKTOP, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await page.goto("/console/sign-in");
      await page.getByLabel("API key").fill("mk_not-a-key");
      await page.getByRole("button", { name: "Sign in" }).click();
      const refusal = page.getByRole("alert");
      await refusal.waitFor();
      expect(await refusal.textContent()).toContain("The API key is unknown or revoked.");
      expect(await refusal.textContent()).toContain("unknown_key");
      await checkPage(page, "limited", "01-sign-in-refused");
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

      await page.getByLabel("API key").fill(limited.api_key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.locator('[data-permission="AGENT_ADMIN"][data-held="true"]').waitFor();
      const held = await page.locator('[data-held="true"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-permission")));
      expect(held).toEqual(["AGENT_ADMIN"]);
      const nav = page.getByRole("navigation", { name: "Main" });
      expect(await nav.getByRole("link", { name: "Review queue" }).count()).toBe(0);
      await checkPage(page, "limited", "02-organization-agents-only");
      await page.goto("/console/reviews");
      await page.getByRole("heading", { name: "Not available to this key" }).waitFor();
      expect(await page.getByText("DECISION_READ").count()).toBeGreaterThan(0);
      await checkPage(page, "limited", "03-reviews-not-available");
      // Revoked while signed in: the next call answers unknown_key and the tab signs out, saying why.
      const revoked = await svc.v1("POST", `/v1/organization/api-keys/${limited.key_id}/revoke`, { bearer: org.apiKey, body: {} });
      expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
      await page.goto("/console/");
      await page.getByText("You were signed out: the API no longer accepts that key").waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      // 401 for the unknown key, 403 and 404 from the permission probes.
      expectCleanConsole(problems, [400, 401, 403, 404]);
    } finally {
      await context.close();
    }
  });

  it("a review resolved elsewhere while its page is open: the refusal says so, and the page shows it resolved", async () => {
    const org = await svc.newOrg();
    const admin = new MandateClient({ base_url: svc.baseUrl, api_key: org.apiKey });
    const suffix = randomUUID().slice(0, 8);
    const [principal, approverKey] = await Promise.all([
      admin.createPrincipal({ display_name: `Rhea Race ${suffix}`, kind: "person", external_ref: `rhea-${suffix}` }),
      admin.createApiKey("approver", ["POLICY_APPROVER", "REVIEWER"]),
    ]);
    const approver = admin.withApiKey(approverKey.api_key);
    await publishVendorPayments(admin, approver, principal.external_ref, [[5_000, 1]]);
    const agent = await activeAgent(admin, `race-bot-${suffix}`, principal.principal_id);
    const decision = await new MandateClient({ base_url: svc.baseUrl }).submitIntent(agent, { action: "vendor_payment", amount: 2_000, currency: "USD", counterparty: "ACME Corp" });
    expect(decision).toMatchObject({ outcome: "HUMAN_REVIEW", status: "PENDING" });
    const context = await browser.newContext({ viewport: DESKTOP, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await signIn(page, org.apiKey);
      await page.goto(`/console/reviews/${decision.decision_id}`);
      await expect.poll(() => page.getByTestId("status").textContent()).toBe("PENDING");
      // Another reviewer rejects it through the API while this page still shows the form.
      await approver.reviewDecision(decision.decision_id, "rejected", "Duplicate invoice.");
      await page.getByLabel("Note (required)").fill("Looks right to me.");
      await page.getByRole("button", { name: "Approve" }).click();
      await page.getByRole("alert").filter({ hasText: "The review was refused" }).waitFor();
      await expect.poll(() => page.getByTestId("status").textContent()).toBe("RESOLVED");
      expect(await page.getByRole("button", { name: "Approve" }).count()).toBe(0);
      await checkPage(page, "review-race", "01-resolved-elsewhere");
      // The Intent in its own member order (the API returns it in the database's: nonce first).
      expect(await page.getByLabel("The Intent as recorded").textContent()).toMatch(/^\{\s*"agent_id": [^,]+,\s*"action": "vendor_payment",\s*"amount": 2000,\s*"currency": "USD",\s*"counterparty": "ACME Corp",\s*"requested_at": [^,]+,\s*"nonce": "[^"]+"\s*\}$/);
      // The refusal itself (409), and the permission probes' 400, 403 and 404 (as in the journeys above).
      expectCleanConsole(problems, [400, 403, 404, 409]);
    } finally {
      await context.close();
    }
  });

  it("operator mode creates an organization and shows its first admin key once", async () => {
    const context = await browser.newContext({ viewport: DESKTOP, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await page.goto("/console/operator");
      await page.getByRole("heading", { name: "Operator mode" }).waitFor();
      await checkPage(page, "operator", "01-operator-sign-in");
      await page.getByLabel("Operator key").fill(svc.operatorKey!);
      await page.getByRole("button", { name: "Use operator key" }).click();
      await page.getByRole("heading", { name: "Create an organization" }).waitFor();
      // An empty name is the API's to refuse, with its field.
      await page.getByRole("button", { name: "Create organization" }).click();
      const refusal = page.getByRole("alert");
      await refusal.waitFor();
      expect(await refusal.textContent()).toMatch(/validation_failed[\s\S]*name/);
      const name = `Acme Treasury ${randomUUID().slice(0, 6)}`;
      await page.getByLabel("Organization name").fill(name);
      await page.getByRole("button", { name: "Create organization" }).click();
      const keyBox = page.getByLabel("First admin key");
      await keyBox.waitFor();
      await checkPage(page, "operator", "02-organization-created");
      const adminKey = await keyBox.inputValue();
      const organizationId = (await page.getByTestId("organization-id").textContent())!;
      const org = await svc.v1("GET", "/v1/organization", { bearer: adminKey });
      expect(org.body).toMatchObject({ organization_id: organizationId, name, sandbox: false });
      // The operator may continue as the new organization's administrator.
      await page.getByRole("button", { name: "Sign in as this organization" }).click();
      await expect.poll(() => page.getByTestId("organization-name").textContent()).toBe(name);
      await page.locator('[data-permission="ORG_ADMIN"][data-held="true"]').waitFor();
      await checkPage(page, "operator", "03-organization");
      // 400 for the empty name; 403, 404 and 400 from the admin key's permission probes.
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });
});
