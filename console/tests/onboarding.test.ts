import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { AgentKey, MandateClient, agentIdentity, type AgentIdentity } from "@mandate/client";
import type { TestService } from "../../test/support/service.js";
import { checkPage, copySecret, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signOut, signUpSandbox } from "./browser.js";

/*
 * Issue 22's "Done when", in Debian's Chromium against a real service: the whole onboarding path
 * in the console. Sandbox sign-up (the key copied from the page) → the principals the documents
 * name, created on the Principals page → a second key (an approver's) created on the API keys
 * page, its secret copied from it → the three governance documents
 * uploaded by the file picker → a graph version generated → a policy authored in the editor and
 * submitted → an agent registered on the Agents page by its public key, and activated → a second
 * key signs in, approves and publishes both (four eyes) → the agent's Intent, sent through the
 * TypeScript client, appears in the review queue without a reload → two reviewers approve it →
 * RESOLVED with its approver → the decision's evidence signature verified in the browser. Then,
 * at phone width, a fresh Intent in the same organization reaches the queue and is approved.
 * Every page is screenshotted (console/test-output/onboarding-*) and checked by axe-core. Only the
 * agent's key pair and its Intents come from outside the console, as they would in production.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

/** What the desktop run onboarded, for the phone run's fresh Intent. */
let onboarded: { sandboxKey: string; sandboxKeyId: string; agent: AgentIdentity } | undefined;

/** The three governance documents, in the formats GovernanceService.UploadGovernanceDocument parses. */
function governanceDocuments(pat: string, sam: string) {
  return [
    { kind: "Signing schedule", name: "schedule.csv", mimeType: "text/csv", rows: 2, text: `principal,role,reports_to\n${pat},clerk,controller\n${sam},controller,\n` },
    {
      kind: "Delegation of authority",
      name: "doa.csv",
      mimeType: "text/csv",
      rows: 2,
      text: "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,50000,\nrole:controller,,vendor_payment,USD,250000,\n",
    },
    // No approval up to 1,000 USD, one up to 5,000, two (four eyes) up to 20,000.
    {
      kind: "Approval matrix",
      name: "matrix.yaml",
      mimeType: "application/yaml",
      rows: 3,
      text: [1_000, 5_000, 20_000].map((n, i) => `- action: vendor_payment\n  currency: USD\n  up_to_amount: ${n}\n  approvals_required: ${i}\n`).join(""),
    },
  ];
}

/** Defers vendor payments to the authority graph, with a hard cap above it. */
const RULES =
  "actions: [vendor_payment]\nrules:\n  - id: hard_cap\n    when:\n      amount: { gt: 1000000 }\n    outcome: DENY\n    reason: amount_over_hard_cap\n  - id: authority\n    authority: true\n";

/**
 * Sends the agent's vendor payment through the TypeScript client while the review queue is open;
 * its row must appear without a reload (a mark left in the page's JavaScript state survives).
 */
async function intentArrives(page: Page, agent: AgentIdentity, amount: number, reason: string) {
  await page.evaluate(() => ((window as unknown as { onboardingMark: number }).onboardingMark = 1));
  const decision = await new MandateClient({ base_url: svc.baseUrl }).submitIntent(agent, { action: "vendor_payment", amount, currency: "USD", counterparty: "ACME Corp" });
  expect(decision).toMatchObject({ outcome: "HUMAN_REVIEW", reason, status: "PENDING" });
  const row = page.locator(`li[data-decision-id="${decision.decision_id}"]`);
  await row.waitFor({ timeout: 30_000 });
  expect(await page.evaluate(() => (window as unknown as { onboardingMark?: number }).onboardingMark)).toBe(1);
  return { decision, row };
}

/** Fills the review note and approves; the note is required. */
async function approve(page: Page, note: string): Promise<void> {
  await page.getByLabel("Note (required)").fill(note);
  await page.getByRole("button", { name: "Approve" }).click();
}

describe("onboarding in the console", () => {
  it("at 1280×800: sign-up → governance → graph → policy (four eyes) → an Intent reviewed live → RESOLVED → signature verified", async () => {
    const run = "onboarding-desktop";
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: svc.baseUrl });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      // 1. Sandbox sign-up: the key is shown once and copied from the page.
      await page.goto("/console/sign-up");
      await page.getByRole("heading", { name: "Create a sandbox organization" }).waitFor();
      await checkPage(page, run, "01-sign-up");
      const suffix = randomUUID().slice(0, 8);
      const { apiKey: sandboxKey, organizationId } = await signUpSandbox(page, `onboarding-${suffix}@example.com`);
      await checkPage(page, run, "02-sign-up-key");
      await page.getByRole("button", { name: "Continue with this key" }).click();
      await expect.poll(() => page.getByTestId("organization-id").textContent()).toBe(organizationId);
      await checkPage(page, run, "03-organization");

      // The principals the documents name, on the Principals page.
      const admin = new MandateClient({ base_url: svc.baseUrl, api_key: sandboxKey });
      const agentKey = await AgentKey.generate();
      const pat = { name: "Pat Payables", external_ref: `pat-${suffix}` };
      const sam = { name: "Sam Controller", external_ref: `sam-${suffix}` };
      await navTo(page, "Principals");
      await page.getByRole("heading", { name: "Principals", level: 1 }).waitFor();
      for (const p of [pat, sam]) {
        await page.getByLabel("Display name").fill(p.name);
        await page.getByLabel("Kind").selectOption({ label: "Person" });
        await page.getByLabel("External ref").fill(p.external_ref);
        await page.getByRole("button", { name: "Create principal" }).click();
        await expect.poll(() => page.getByTestId("principal-created").textContent()).toContain(`Created ${p.name}`);
      }
      await expect.poll(() => page.getByTestId("principals").locator("tbody tr th").allTextContents()).toEqual([pat.name, sam.name]);
      await checkPage(page, run, "03a-principals");

      // The second key, on the API keys page: its secret is shown once and copied from the page.
      await navTo(page, "API keys");
      await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
      await page.getByLabel("Name", { exact: true }).fill("second pair of eyes");
      for (const p of ["POLICY_APPROVER", "REVIEWER", "DECISION_READ", "EVENTS_READ"]) await page.getByLabel(p, { exact: true }).check();
      await page.getByRole("button", { name: "Create key" }).click();
      const approver = { api_key: await copySecret(page, "New key's secret"), key_id: (await page.getByTestId("created-key-id").textContent())! };
      // The organization's two keys: the sandbox key is the one this test did not create.
      const listed = page.getByTestId("api-keys").locator("tbody tr");
      await expect.poll(() => listed.count()).toBe(2);
      const keyIds = await listed.evaluateAll((rows) => rows.map((r) => r.getAttribute("data-key-id")!));
      const sandboxKeyId = keyIds.find((id) => id !== approver.key_id)!;
      expect(keyIds).toContain(approver.key_id);
      await checkPage(page, run, "03b-api-key-created");

      // 2. The three governance documents, by the file picker.
      await navTo(page, "Governance");
      await page.getByRole("heading", { name: "Governance", level: 1 }).waitFor();
      await page.getByText("No document uploaded yet.").waitFor();
      await checkPage(page, run, "04-governance-empty");
      for (const doc of governanceDocuments(pat.external_ref, sam.external_ref)) {
        await page.getByLabel("Kind").selectOption({ label: doc.kind });
        await page.getByLabel("File").setInputFiles({ name: doc.name, mimeType: doc.mimeType, buffer: Buffer.from(doc.text) });
        await expect.poll(() => page.getByLabel("Name", { exact: true }).inputValue()).toBe(doc.name);
        await page.getByRole("button", { name: "Upload" }).click();
        await page.getByText(`Uploaded ${doc.name}: ${doc.rows} rows.`).waitFor();
      }
      await expect.poll(() => page.getByTestId("documents").locator("tbody tr").count()).toBe(3);
      await checkPage(page, run, "05-governance-uploaded");

      // 3a. A graph version generated from them: a draft its author may not approve.
      await page.getByRole("button", { name: "Generate graph version" }).click();
      const generated = page.getByTestId("generated");
      await generated.waitFor();
      expect(await generated.textContent()).toContain("Generated version 1 (draft).");
      await generated.getByRole("link", { name: "1" }).click();
      await page.getByRole("heading", { name: "Authority graph version 1" }).waitFor();
      const picture = page.getByTestId("graph-picture");
      for (const node of ["role:clerk", "role:controller", pat.external_ref, sam.external_ref]) await picture.locator(`[data-node="${node}"]`).waitFor();
      expect(await page.getByTestId("graph-state").textContent()).toBe("draft");
      expect(await page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      expect(await page.getByTestId("approve-reason").textContent()).toContain("This key authored the version");
      await checkPage(page, run, "06-graph-version-draft");

      // 4a. A policy authored in the editor and submitted; its author may not approve it.
      await navTo(page, "Policies");
      await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
      await checkPage(page, run, "07-policies");
      await page.getByRole("link", { name: "New policy" }).click();
      await page.getByRole("heading", { name: "New policy" }).waitFor();
      await page.getByLabel("Policy key").fill("payments");
      await page.getByLabel("Description").fill("Vendor payments within delegated authority.");
      await page.getByLabel("Rules document (YAML)").fill(RULES);
      await checkPage(page, run, "08-policy-editor");
      await page.getByRole("button", { name: "Create policy" }).click();
      await page.getByRole("heading", { name: "payments version 1" }).waitFor();
      await page.getByRole("button", { name: "Submit for review" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("in_review");
      expect(await page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      expect(await page.getByTestId("approve-reason").textContent()).toContain("this key authored it");
      await checkPage(page, run, "09-policy-in-review");

      // The agent, registered on the Agents page with its public key pasted (the private key stays here), then activated.
      const agentName = `payables-bot-${suffix}`;
      await navTo(page, "Agents");
      await page.getByRole("link", { name: "Register an agent" }).click();
      await page.getByRole("heading", { name: "Register an agent" }).waitFor();
      await page.getByLabel("Name").fill(agentName);
      await page.getByLabel("Acts for (principal)").selectOption({ label: `Pat Payables (${pat.external_ref})` });
      await page.getByLabel("Public key").fill(agentKey.public_key);
      await checkPage(page, run, "10-register-agent");
      await page.getByRole("button", { name: "Register agent" }).click();
      await page.getByRole("heading", { name: `Agent ${agentName}` }).waitFor();
      await page.getByRole("button", { name: "Activate" }).click();
      await expect.poll(() => page.getByTestId("agent-state").textContent()).toBe("active");
      await checkPage(page, run, "11-agent-active");
      const agentId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
      const agent = agentIdentity(await admin.getAgent(agentId), agentKey);

      // 3b and 4b. The second key signs in and approves and publishes both.
      await signOut(page);
      await checkPage(page, run, "12-sign-in");
      await signIn(page, approver.api_key);
      await page.locator('[data-permission="POLICY_APPROVER"][data-held="true"]').waitFor();
      await checkPage(page, run, "13-organization-approver");
      await navTo(page, "Governance");
      await page.getByTestId("graph-versions").getByRole("link", { name: "Version 1" }).click();
      await page.getByRole("heading", { name: "Authority graph version 1" }).waitFor();
      await page.getByRole("button", { name: "Approve" }).click();
      await expect.poll(() => page.getByTestId("graph-state").textContent()).toBe("approved");
      expect(await page.getByTestId("graph-approver").textContent()).toBe(approver.key_id);
      await page.getByRole("button", { name: "Publish" }).click();
      await expect.poll(() => page.getByTestId("graph-state").textContent()).toBe("active");
      await page.getByText("Published: this version is now active.").waitFor();
      expect(await page.getByText("it can now be published").count()).toBe(0);
      await checkPage(page, run, "14-graph-version-published");
      await navTo(page, "Policies");
      await page.getByTestId("policies").getByRole("link", { name: "payments" }).click();
      await page.getByTestId("policy-versions").getByRole("link", { name: "Version 1" }).click();
      await page.getByRole("heading", { name: "payments version 1" }).waitFor();
      await page.getByRole("button", { name: "Approve" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("approved");
      await page.getByRole("button", { name: "Publish" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("active");
      expect(await page.getByTestId("policy-approver").textContent()).toBe(approver.key_id);
      await checkPage(page, run, "15-policy-published");
      onboarded = { sandboxKey, sandboxKeyId, agent };

      // 5. The agent's Intent, through the TypeScript client, appears in the open queue without a reload.
      await navTo(page, "Review queue");
      await page.getByText("No decision is waiting for a human review.").waitFor();
      await expect.poll(() => page.getByTestId("live-mode").textContent()).toContain("event stream");
      await checkPage(page, run, "16-review-queue-empty");
      const { decision, row } = await intentArrives(page, agent, 12_000, "requires_dual_approval");
      await expect.poll(() => row.textContent()).toContain("Pat Payables");
      const rowText = (await row.textContent())!;
      for (const fact of ["vendor_payment", "12,000 USD", "requires_dual_approval", agentName, "payments v1", "authority graph v1"]) expect(rowText).toContain(fact);
      await checkPage(page, run, "17-review-queue-pending");

      // 6. Two approvals (the graph asks four eyes above 5,000 USD): the second key, then the sandbox key.
      await row.getByRole("link").click();
      await page.getByRole("heading", { name: `Decision ${decision.decision_id}` }).waitFor();
      await expect.poll(() => page.getByTestId("status").textContent()).toBe("PENDING");
      await checkPage(page, run, "18-review");
      await approve(page, "Invoice matches PO 4711.");
      await expect.poll(() => page.getByTestId("approval").textContent()).toContain(`Approved first by ${approver.key_id}`);
      expect(await page.getByTestId("status").textContent()).toBe("PENDING");
      await checkPage(page, run, "19-review-first-approval");
      await signOut(page);
      await signIn(page, sandboxKey);
      await navTo(page, "Review queue");
      const pending = page.locator(`li[data-decision-id="${decision.decision_id}"]`);
      await expect.poll(() => pending.textContent()).toContain(`1 of 2 approvals, first by ${approver.key_id}`);
      await checkPage(page, run, "20-review-queue-one-approval");
      await pending.getByRole("link").click();
      await page.getByTestId("approval").waitFor();
      await approve(page, "Second pair of eyes: fine.");

      // 7. RESOLVED, with its approver; the outcome still reads HUMAN_REVIEW.
      await page.getByTestId("resolution").waitFor();
      expect(await page.getByTestId("status").textContent()).toBe("RESOLVED");
      expect(await page.getByTestId("outcome").textContent()).toBe("HUMAN_REVIEW");
      expect(await page.getByTestId("resolution-value").textContent()).toBe("approved");
      expect(await page.getByTestId("resolved-by").textContent()).toBe(sandboxKeyId);
      await checkPage(page, run, "21-review-resolved");

      // 8. The decision's page, resolved too, checks its evidence signature in the browser against the JWKS.
      await page.getByRole("link", { name: "Decision and evidence record" }).click();
      await page.waitForURL(`**/console/decisions/${encodeURIComponent(decision.decision_id)}`);
      await expect.poll(() => page.getByTestId("status").textContent()).toBe("RESOLVED");
      expect(await page.getByTestId("resolved-by").textContent()).toBe(sandboxKeyId);
      const verified = page.getByRole("status").filter({ hasText: /^Signature verified$/ });
      await verified.waitFor();
      expect(await verified.textContent()).toBe("Signature verified");
      await checkPage(page, run, "22-decision-evidence");

      // The permission probes' answers (400 for a held permission probed with an empty request, 403, 404); no script error.
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });

  it("at 390×844: a fresh Intent in the onboarded organization reaches the live queue, is approved, its signature verified", async () => {
    if (!onboarded) throw new Error("the desktop run did not onboard the organization this run reuses");
    const { sandboxKey, sandboxKeyId, agent } = onboarded;
    const run = "onboarding-phone";
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await signIn(page, sandboxKey);
      await checkPage(page, run, "01-organization");
      await navTo(page, "Review queue");
      await page.getByText("No decision is waiting for a human review.").waitFor();
      await checkPage(page, run, "02-review-queue-empty");
      // 2,500 USD: one approval.
      const { decision, row } = await intentArrives(page, agent, 2_500, "requires_approval");
      await checkPage(page, run, "03-review-queue-pending");
      await row.getByRole("link").click();
      await page.getByRole("heading", { name: `Decision ${decision.decision_id}` }).waitFor();
      await checkPage(page, run, "04-review");
      await approve(page, "Within the clerk's band; invoice attached.");
      await page.getByTestId("resolution").waitFor();
      expect(await page.getByTestId("status").textContent()).toBe("RESOLVED");
      expect(await page.getByTestId("resolved-by").textContent()).toBe(sandboxKeyId);
      await checkPage(page, run, "05-review-resolved");
      await page.getByRole("link", { name: "Decision and evidence record" }).click();
      await page.getByRole("status").filter({ hasText: /^Signature verified$/ }).waitFor();
      await checkPage(page, run, "06-decision-evidence");
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });
});
