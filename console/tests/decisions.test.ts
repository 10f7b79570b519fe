import { randomUUID } from "node:crypto";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { beforeAll, describe, expect, it } from "vitest";
import { MandateClient, type Decision } from "@mandate/client";
import { ReconciliationStatus } from "../../src/gen/mandate/v1/decisions_pb.js";
import { ReconciliationService } from "../../src/gen/mandate/v1alpha/execution_pb.js";
import type { TestService } from "../../test/support/service.js";
import { checkPage, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signOut, tabTo } from "./browser.js";
import { activeAgent, publishVendorPayments } from "./vendor-payments.js";

/*
 * Issue 22, "Decisions and evidence", in Debian's Chromium against a real service. An
 * organization's decisions are made through the TypeScript client (a published policy and
 * authority graph; ALLOW, DENY and HUMAN_REVIEW outcomes from two agents; a capability issued
 * and consumed, then reconciled, another issued from an approved review). In the console: the list, filtered by
 * outcome, review status and agent, paged, searched by id by keyboard; a decision's page with
 * its evidence record, chain position and capability; the signature checked in the browser
 * against the JWKS ("Signature verified"), and, with the GetEvidence answer tampered in flight,
 * "Signature invalid". Every page is screenshotted (console/test-output/decisions-*) and
 * checked by axe-core; the list and a decision are also opened at phone width.
 */

let svc: TestService;
let browser: Browser;
let data: Awaited<ReturnType<typeof makeDecisions>> & { apiKey: string };

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const USD = (amount: number) => ({ action: "vendor_payment", amount, currency: "USD", counterparty: "ACME Corp" });

/**
 * Publishes a policy (DENY over 1,000,000 USD, else the authority graph: no approval up to 1,000,
 * one up to 5,000) and makes, oldest first: 7 ALLOWs by the clerk's agent, 3 DENYs by the
 * second agent, an ALLOW whose capability is issued and consumed, and two reviews (one approved
 * with a capability issued from it, one left pending): 13 decisions.
 */
async function makeDecisions(baseUrl: string, apiKey: string) {
  const admin = new MandateClient({ base_url: baseUrl, api_key: apiKey });
  const suffix = randomUUID().slice(0, 8);
  const [principal, approverKey] = await Promise.all([
    admin.createPrincipal({ display_name: `Dana Decisions ${suffix}`, kind: "person", external_ref: `dana-${suffix}` }),
    admin.createApiKey("approver", ["POLICY_APPROVER", "REVIEWER"]),
  ]);
  const readerKey = await admin.createApiKey("decision reader", ["DECISION_READ"]);
  const approver = admin.withApiKey(approverKey.api_key);
  await publishVendorPayments(admin, approver, principal.external_ref, [
    [1_000, 0],
    [5_000, 1],
  ]);
  const clerkName = `clerk-bot-${suffix}`;
  const capName = `cap-bot-${suffix}`;
  const clerk = await activeAgent(admin, clerkName, principal.principal_id);
  const capper = await activeAgent(admin, capName, principal.principal_id);
  const agents = new MandateClient({ base_url: baseUrl });
  // One at a time: the list is newest first, so the order made here is the order it shows.
  const allows: Decision[] = [];
  for (let i = 1; i <= 7; i++) allows.push(await agents.submitIntent(clerk, USD(100 * i)));
  const denies: Decision[] = [];
  for (let i = 1; i <= 3; i++) denies.push(await agents.submitIntent(capper, USD(2_000_000 + i)));
  const consumedAllow = await agents.submitIntent(clerk, USD(900));
  const token = await admin.issueCapability(consumedAllow.decision_id, { audience: "payments-gateway", issued_by: "decisions-test" });
  await admin.verifyCapability({ token: token.token, audience: "payments-gateway", action: "vendor_payment", resource: "", constraints: { amount: "900", currency: "USD", counterparty: "ACME Corp" } });
  const approved = await agents.submitIntent(clerk, USD(2_500));
  await approver.reviewDecision(approved.decision_id, "approved", "Invoice matches the purchase order.");
  await admin.issueCapabilityFromReview(approved.decision_id, { audience: "payments-gateway", issued_by: "decisions-test" });
  const pending = await agents.submitIntent(clerk, USD(3_000));
  for (const d of allows) expect(d.outcome).toBe("ALLOW");
  for (const d of denies) expect(d).toMatchObject({ outcome: "DENY", reason: "amount_over_hard_cap" });
  expect([consumedAllow.outcome, approved.outcome, pending.outcome]).toEqual(["ALLOW", "HUMAN_REVIEW", "HUMAN_REVIEW"]);
  return { allows, denies, consumedAllow, approved, pending, clerkName, clerkId: clerk.agent_id, capName, capperId: capper.agent_id, total: 13, readerKey: readerKey.api_key };
}

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));
beforeAll(async () => {
  const org = await svc.newOrg();
  data = { ...(await makeDecisions(svc.baseUrl, org.apiKey)), apiKey: org.apiKey };
  // Reconciliation is the operator's (no public endpoint): a consumed capability without a receipt is RECEIPT_MISSING.
  const reconciled = await svc.connect(ReconciliationService).reconcile(
    { decisionId: data.consumedAllow.decision_id },
    { headers: { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId } },
  );
  expect(reconciled.status).toBe(ReconciliationStatus.RECEIPT_MISSING);
});

/** The decision ids of the list's rows, top to bottom. */
function rowIds(page: Page): Promise<string[]> {
  return page.locator("tr[data-decision-id]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-decision-id")!));
}

/** Waits until the list shows exactly `ids` (in order). */
async function expectRows(page: Page, ids: string[]): Promise<void> {
  await expect.poll(() => rowIds(page), { timeout: 15_000 }).toEqual(ids);
}

/** The signature verdict of the page (role status, exact text once checked). */
function verdict(page: Page) {
  return page.getByTestId("signature-check");
}

async function waitForVerdict(page: Page): Promise<string> {
  await expect.poll(async () => (await verdict(page).textContent()) ?? "", { timeout: 15_000 }).not.toMatch(/^Checking|^$/);
  return (await verdict(page).textContent())!;
}

async function newContext(viewport: { width: number; height: number }): Promise<BrowserContext> {
  const phone = viewport.width < 600;
  return browser.newContext({ viewport, baseURL: svc.baseUrl, ...(phone && { isMobile: true, hasTouch: true }) });
}

describe("the decisions and evidence pages", () => {
  it("at 1280×800: filter, page, search and open decisions; the evidence signature verifies in the browser and a tampered record does not", async () => {
    const { allows, denies, consumedAllow, approved, pending, clerkName, clerkId, capName, capperId, total } = data;
    const newestFirst = [pending, approved, consumedAllow, ...[...denies].reverse(), ...[...allows].reverse()].map((d) => d.decision_id);
    expect(newestFirst).toHaveLength(total);
    const context = await newContext(DESKTOP);
    const { page, problems } = await openPage(context);
    const run = "decisions-desktop";
    try {
      await signIn(page, data.apiKey);
      await navTo(page, "Decisions");
      await page.getByRole("heading", { name: "Decisions", exact: true }).waitFor();
      await expectRows(page, newestFirst);
      const denyRow = page.locator(`tr[data-decision-id="${denies[0]!.decision_id}"]`);
      for (const fact of ["DENY", "final", "vendor_payment", "2,000,001 USD", "amount_over_hard_cap", capName]) expect(await denyRow.textContent()).toContain(fact);
      expect(await page.locator(`tr[data-decision-id="${pending.decision_id}"]`).getByTestId("row-status").textContent()).toBe("PENDING");
      await checkPage(page, run, "01-decisions");

      // Filters: each is the API's (ListDecisions), kept in the address.
      await page.getByLabel("Outcome").selectOption({ label: "DENY" });
      await expectRows(page, denies.map((d) => d.decision_id).reverse());
      expect(new URL(page.url()).searchParams.get("outcome")).toBe("DENY");
      await checkPage(page, run, "02-decisions-deny");
      await page.getByLabel("Outcome").selectOption({ label: "Any outcome" });
      await page.getByLabel("Review status").selectOption({ label: "PENDING" });
      await expectRows(page, [pending.decision_id]);
      await page.getByLabel("Review status").selectOption({ label: "RESOLVED" });
      await expectRows(page, [approved.decision_id]);
      await page.getByLabel("Review status").selectOption({ label: "Any status" });
      await page.getByLabel("Agent").selectOption({ value: capperId });
      await expectRows(page, denies.map((d) => d.decision_id).reverse());
      await page.getByLabel("Outcome").selectOption({ label: "ALLOW" });
      await page.getByText("No decision matches this filter.").waitFor();
      await checkPage(page, run, "03-decisions-none-match");
      await page.getByLabel("Outcome").selectOption({ label: "Any outcome" });
      await page.getByLabel("Agent").selectOption({ label: "Any agent" });
      await expect.poll(() => page.getByLabel("Agent").locator("option").allTextContents()).toContain(`${clerkName} (${clerkId})`);

      // Pages of ten: the first ten, then the three older, then back.
      await page.getByLabel("Per page").selectOption({ label: "10" });
      await expectRows(page, newestFirst.slice(0, 10));
      expect(await page.getByTestId("page-number").textContent()).toBe("Page 1");
      expect(await page.getByRole("button", { name: "← Newer" }).isDisabled()).toBe(true);
      await page.getByRole("button", { name: "Older →" }).click();
      await expectRows(page, newestFirst.slice(10));
      expect(await page.getByTestId("page-number").textContent()).toBe("Page 2");
      expect(await page.getByRole("button", { name: "Older →" }).isDisabled()).toBe(true);
      await checkPage(page, run, "04-decisions-page-2");
      await page.getByRole("button", { name: "← Newer" }).click();
      await expectRows(page, newestFirst.slice(0, 10));

      // Search by id, by keyboard alone: Tab to the field, type, Enter.
      await tabTo(page, page.getByLabel("Decision id"));
      await page.keyboard.type(denies[1]!.decision_id);
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { name: `Decision ${denies[1]!.decision_id}` }).waitFor();
      expect(await page.getByTestId("outcome").textContent()).toBe("DENY");
      expect(await page.getByTestId("reason").textContent()).toBe("amount_over_hard_cap");
      expect(await waitForVerdict(page)).toBe("Signature verified");
      expect(await page.getByRole("status").filter({ hasText: /^Signature verified$/ }).count()).toBe(1);
      expect(await page.getByTestId("record-match").textContent()).toMatch(/^✓ The record is this decision's/);
      expect(await page.getByTestId("evidence-kind").textContent()).toBe("decision");
      await expect.poll(() => page.getByTestId("seq").textContent()).toMatch(/^seq \d+ of \d+ \(the chain's head, whose signature verifies\)$/);
      await expect.poll(() => page.getByTestId("previous-record").textContent()).toContain("✓ its digest is this record's previous digest");
      await expect.poll(() => page.getByTestId("next-record").textContent()).toContain("✓ it links back to this record's digest");
      expect(await page.getByTestId("capability").textContent()).toContain("only an ALLOW decision");
      await checkPage(page, run, "05-decision-deny");

      // The capability of an ALLOW, issued and consumed, read from the chain and GetCapability.
      await page.getByRole("link", { name: "← Decisions" }).click();
      await page.locator(`tr[data-decision-id="${consumedAllow.decision_id}"]`).getByRole("link").click();
      await page.getByRole("heading", { name: `Decision ${consumedAllow.decision_id}` }).waitFor();
      expect(await waitForVerdict(page)).toBe("Signature verified");
      await expect.poll(() => page.getByTestId("capability-state").textContent(), { timeout: 15_000 }).toBe("consumed");
      expect(await page.getByTestId("reconciliation").textContent()).toContain("StatusRECEIPT_MISSING");
      // The raw record, and the exact bytes hashed, open by keyboard.
      await page.getByText("Raw record, as the API returned it").click();
      expect(JSON.parse((await page.getByTestId("raw-record").textContent())!)).toMatchObject({ evidenceId: consumedAllow.evidence_id, kind: "decision", subjectId: consumedAllow.decision_id });
      await page.getByText("The bytes that were hashed").click();
      const canonical = JSON.parse((await page.getByLabel("Canonical JSON of the record's covered members").textContent())!) as Record<string, unknown>;
      expect(Object.keys(canonical)).toEqual(["created_at", "evidence_id", "kind", "organization_id", "payload", "prev_digest", "seq", "subject_id"]);
      await checkPage(page, run, "06-decision-consumed-capability");

      // A neighbour in the chain opens as an evidence record page, checked the same way.
      const next = page.getByTestId("next-record").getByRole("link");
      await next.waitFor();
      await next.click();
      await page.getByRole("heading", { name: /^Evidence record evd_/ }).waitFor();
      expect(await waitForVerdict(page)).toBe("Signature verified");
      expect(await page.getByTestId("evidence-kind").textContent()).toBe("capability.issued");
      await checkPage(page, run, "07-evidence-record");

      // A resolved review links to its decision page: the resolution and the capability issued from it.
      await page.goto(`/console/reviews/${approved.decision_id}`);
      await page.getByRole("link", { name: "Decision and evidence record" }).click();
      await page.getByRole("heading", { name: `Decision ${approved.decision_id}` }).waitFor();
      expect(await page.getByTestId("resolution-value").textContent()).toBe("approved");
      expect(await waitForVerdict(page)).toBe("Signature verified");
      expect(await page.getByTestId("record-match").textContent()).toMatch(/^✓/);
      // The resolution shown is the one its own signed record states.
      await expect
        .poll(() => page.getByTestId("resolution-records").textContent(), { timeout: 15_000 })
        .toMatch(/^✓ The resolution is signed: its record says the same resolution, reviewer, note and approvals, signature verified here\./);
      await expect.poll(() => page.getByTestId("capability-state").textContent(), { timeout: 15_000 }).toBe("issued");
      expect(await page.getByTestId("reconciliation").textContent()).toContain("Not reconciled");
      await checkPage(page, run, "08-decision-review-approved");

      // The check is the browser's own: a record altered in flight fails it.
      const tamper = (edit: (record: Record<string, unknown>) => void) =>
        page.route("**/mandate.v1.EvidenceService/GetEvidence", async (route) => {
          const response = await route.fetch();
          const record = (await response.json()) as Record<string, unknown>;
          edit(record);
          await route.fulfill({ response, json: record });
        });
      await tamper((r) => ((r.payload as Record<string, unknown>).reason = "within_limits"));
      await page.goto(`/console/decisions/${denies[1]!.decision_id}`);
      expect(await waitForVerdict(page)).toMatch(/^Signature invalid: the record's content hashes to [0-9a-f]{64}, not to the signed digest [0-9a-f]{64}$/);
      expect(await page.getByTestId("record-match").textContent()).toBe("✗ The record differs from the decision shown above in: reason.");
      await checkPage(page, run, "09-decision-tampered-payload");
      await page.unrouteAll({ behavior: "wait" });
      // The content left alone, the signature itself altered: Ed25519 refuses it.
      await tamper((r) => {
        const s = r.signature as string;
        r.signature = (s[0] === "A" ? "B" : "A") + s.slice(1);
      });
      await page.goto(`/console/decisions/${denies[1]!.decision_id}`);
      expect(await waitForVerdict(page)).toMatch(/^Signature invalid: the signature is not key \S+'s signature of the digest$/);
      await checkPage(page, run, "10-decision-tampered-signature");
      await page.unrouteAll({ behavior: "wait" });

      // The review's records are checked the same way: a resolution record altered in flight fails.
      await page.route("**/mandate.v1.EvidenceService/ListEvidence", async (route) => {
        const response = await route.fetch();
        const answer = (await response.json()) as { records?: Record<string, unknown>[] };
        for (const r of answer.records ?? []) if (r.kind === "decision.resolved") (r.payload as Record<string, unknown>).reason = "Approved without looking.";
        await route.fulfill({ response, json: answer });
      });
      await page.goto(`/console/decisions/${approved.decision_id}`);
      await expect
        .poll(() => page.getByTestId("resolution-records").textContent(), { timeout: 15_000 })
        .toMatch(/^✗ 1 of the review's 1 signed record fails the signature check\./);
      await checkPage(page, run, "10b-decision-tampered-resolution");
      await page.unrouteAll({ behavior: "wait" });

      // An unknown id: the API's refusal, shown as such.
      await page.goto("/console/decisions/dec_nothing_here");
      const refusal = page.getByRole("alert");
      await refusal.waitFor();
      expect(await refusal.textContent()).toContain("not_found");
      await checkPage(page, run, "11-decision-not-found");

      // A key holding DECISION_READ only: the decision, but neither its evidence nor an evidence page.
      await signOut(page);
      await signIn(page, data.readerKey);
      await page.goto(`/console/decisions/${denies[1]!.decision_id}`);
      await page.getByText("This key lacks EVIDENCE_READ").waitFor();
      expect(await page.getByTestId("outcome").textContent()).toBe("DENY");
      expect(await verdict(page).count()).toBe(0);
      await checkPage(page, run, "12-decision-without-evidence-read");
      await page.goto(`/console/evidence/${denies[1]!.evidence_id}`);
      await page.getByRole("heading", { name: "Not available to this key" }).waitFor();
      expect(await page.getByText("EVIDENCE_READ").count()).toBeGreaterThan(0);
      // 403 and 404 from the permission probes and the unknown id; 400 from a probe.
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });

  it("at phone width: the list, and a decision whose signature verifies", async () => {
    const context = await newContext(PHONE);
    const { page, problems } = await openPage(context);
    const run = "decisions-phone";
    try {
      await signIn(page, data.apiKey);
      await navTo(page, "Decisions");
      await page.locator(`tr[data-decision-id="${data.pending.decision_id}"]`).waitFor();
      await checkPage(page, run, "01-decisions");
      await page.locator(`tr[data-decision-id="${data.allows[0]!.decision_id}"]`).getByRole("link").click();
      await page.getByRole("heading", { name: `Decision ${data.allows[0]!.decision_id}` }).waitFor();
      expect(await waitForVerdict(page)).toBe("Signature verified");
      await expect.poll(() => page.getByTestId("capability-state").textContent(), { timeout: 15_000 }).toBe("None issued yet.");
      await checkPage(page, run, "02-decision");
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });
});
