import { randomUUID } from "node:crypto";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { AgentKey, MandateClient, agentIdentity } from "@mandate/client";
import type { TestService } from "../../test/support/service.js";
import { checkPage as checkRunPage, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signOut } from "./browser.js";

/*
 * Issue 22, the Governance and Policies pages, in Debian's Chromium against a real service.
 * Governance: three documents uploaded (by the file picker and by drag and drop), one refused
 * with its error shown at its line in the document, corrected and uploaded; a graph version
 * generated, drawn and tabled, compared with the (absent) active version; its author's approval
 * refused by the API in a second tab, then disabled with the reason; approved and published by a
 * second key. Policies: a rules document with a YAML syntax error (caught as typed) and a rule
 * the API refuses at its line, corrected and created; the Rego highlighted; submitted, approve
 * disabled for its author; approved and published by the second key; an Intent dry-run with every
 * rule's explanation and the trace; a second version replayed against recorded Intents showing
 * the flip; a disable requested and left pending. Every page is screenshotted
 * (console/test-output/authoring/) and checked by axe-core.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

const RUN = "authoring";
const VIEWPORT = { width: 1280, height: 800 };

/** Screenshot and axe-core, into this file's folder. */
const checkPage = (page: Page, name: string) => checkRunPage(page, RUN, name);

/** Drops a file on the upload form's drop zone, as a user dragging it from their desktop would. */
async function dropFile(page: Page, name: string, text: string): Promise<void> {
  const dataTransfer = await page.evaluateHandle(
    ({ name, text }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([text], name, { type: "text/csv" }));
      return dt;
    },
    { name, text },
  );
  await page.getByTestId("drop-zone").dispatchEvent("drop", { dataTransfer });
}

describe("the console's governance and policies pages", () => {
  it("upload → generate → picture → four-eyes publish; author a policy → four-eyes publish → dry run → replay", async () => {
    const org = await svc.newOrg();
    const admin = new MandateClient({ base_url: svc.baseUrl, api_key: org.apiKey });
    const suffix = randomUUID().slice(0, 8);
    const [pat, sam, second] = await Promise.all([
      admin.createPrincipal({ display_name: "Pat Payables", kind: "person", external_ref: `pat-${suffix}` }),
      admin.createPrincipal({ display_name: "Sam Controller", kind: "person", external_ref: `sam-${suffix}` }),
      admin.createApiKey("second pair of eyes", ["POLICY_APPROVER", "POLICY_AUTHOR"]),
    ]);
    const key = await AgentKey.generate();
    const registered = await admin.registerAgent({ name: `payables-bot-${suffix}`, principal_id: pat.principal_id, key });
    await admin.activate(registered.agent_id);
    const agent = agentIdentity(registered, key);

    const context = await browser.newContext({ viewport: VIEWPORT, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    let other: BrowserContext | undefined;
    try {
      await signIn(page, org.apiKey);

      // --- Governance: three documents -------------------------------------------------------
      await navTo(page, "Governance");
      await page.getByRole("heading", { name: "Governance", level: 1 }).waitFor();
      await page.getByText("No document uploaded yet.").waitFor();
      await checkPage(page, "01-governance-empty");

      // The signing schedule by the file picker: its name and format come from the file.
      const schedule = `principal,role,reports_to\n${pat.external_ref},clerk,controller\n${sam.external_ref},controller,\n`;
      await page.getByLabel("Kind").selectOption({ label: "Signing schedule" });
      await page.getByLabel("File").setInputFiles({ name: "schedule.csv", mimeType: "text/csv", buffer: Buffer.from(schedule) });
      await expect.poll(() => page.getByLabel("Name", { exact: true }).inputValue()).toBe("schedule.csv");
      await page.getByRole("button", { name: "Upload" }).click();
      await page.getByText("Uploaded schedule.csv: 2 rows.").waitFor();

      // The delegation of authority by drag and drop, with a bad amount on line 3: refused, the error at its line.
      const doa = (amount: string) =>
        `holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,50000,\nrole:controller,,vendor_payment,USD,${amount},\n${sam.external_ref},${pat.external_ref},vendor_payment,USD,20000,\nrole:clerk,,vendor_payment,USD,40000,\n`;
      await page.getByLabel("Kind").selectOption({ label: "Delegation of authority" });
      await dropFile(page, "doa.csv", doa("lots"));
      await expect.poll(() => page.getByLabel("Content").inputValue()).toContain("lots");
      await page.getByRole("button", { name: "Upload" }).click();
      const note = page.getByTestId("upload-errors").locator('[data-testid="line-note"][data-line="3"]');
      await note.waitFor();
      expect(await note.textContent()).toMatch(/^Line 3, column 5: max_amount must be .*\(found "lots"\)$/);
      expect(await page.getByRole("alert").textContent()).toContain("validation_failed");
      await checkPage(page, "02-governance-error-in-place");
      // Corrected in the page and uploaded.
      await page.getByLabel("Content").fill(doa("250000"));
      await page.getByRole("button", { name: "Upload" }).click();
      await page.getByText("Uploaded doa.csv: 4 rows.").waitFor();
      expect(await page.getByTestId("upload-errors").count()).toBe(0);

      // The approval matrix as YAML, by the file picker.
      const matrix = [1_000, 5_000, 20_000].map((n, i) => `- action: vendor_payment\n  currency: USD\n  up_to_amount: ${n}\n  approvals_required: ${i}\n`).join("");
      await page.getByLabel("Kind").selectOption({ label: "Approval matrix" });
      await page.getByLabel("File").setInputFiles({ name: "matrix.yaml", mimeType: "application/yaml", buffer: Buffer.from(matrix) });
      await expect.poll(() => page.getByLabel("Format").inputValue()).toBe("yaml");
      await page.getByRole("button", { name: "Upload" }).click();
      await page.getByText("Uploaded matrix.yaml: 3 rows.").waitFor();
      await expect.poll(() => page.getByTestId("documents").locator("tbody tr").count()).toBe(3);

      // Generate: a draft version, with generation's answer (warnings, if any) shown.
      await page.getByRole("button", { name: "Generate graph version" }).click();
      const generated = page.getByTestId("generated");
      await generated.waitFor();
      expect(await generated.textContent()).toContain("Generated version 1 (draft). 1 warning:");
      // The clerk's second limit (line 5) is covered by its first (line 2): a warning citing the document and line.
      expect(await generated.getByTestId("warning").textContent()).toMatch(/^shadowed_row doa\.csv line 5: /);
      await checkPage(page, "03-governance-generated");
      await generated.getByRole("link", { name: "1" }).click();

      // The version: a picture, tables, the difference from the active version (none yet).
      await page.getByRole("heading", { name: "Authority graph version 1" }).waitFor();
      const picture = page.getByTestId("graph-picture");
      await picture.waitFor();
      for (const node of ["role:clerk", "role:controller", pat.external_ref, sam.external_ref]) await picture.locator(`[data-node="${node}"]`).waitFor();
      expect(await picture.locator(`[data-edge="${sam.external_ref}→${pat.external_ref}"]`).textContent()).toContain("delegates vendor_payment ≤ 20,000 USD");
      expect(await picture.locator(`[data-edge="role:clerk→role:controller"]`).textContent()).toContain("reports to");
      // A principal is drawn with its display name (PrincipalService) above its external_ref.
      await expect.poll(() => picture.locator(`[data-node="${pat.external_ref}"]`).textContent()).toBe(`Pat Payables${pat.external_ref}`);
      expect(await picture.locator('[data-bands="vendor_payment (USD)"]').textContent()).toContain("2 approvals");
      expect(await page.getByTestId("table-limits").locator("tbody tr").count()).toBe(3);
      expect(await page.getByTestId("diff-summary").textContent()).toContain("No version is active yet");
      expect(await page.getByTestId("graph-state").textContent()).toBe("draft");
      // GetCaller says which identity this key is: it authored the version.
      await expect.poll(() => page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      expect(await page.getByTestId("approve-reason").textContent()).toContain("This key authored the version");
      await checkPage(page, "04-graph-version");

      // A fresh tab signed in with the same key knows it too, with nothing done in it: Approve is disabled, saying why.
      other = await browser.newContext({ viewport: VIEWPORT, baseURL: svc.baseUrl });
      const second_ = await openPage(other);
      await signIn(second_.page, org.apiKey);
      await second_.page.goto("/console/governance/versions/1");
      await second_.page.getByTestId("approve-reason").waitFor();
      expect(await second_.page.getByTestId("approve-reason").textContent()).toContain("This key authored the version");
      expect(await second_.page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      await checkPage(second_.page, "05-graph-approval-disabled");
      expectCleanConsole(second_.problems, []);
      await other.close();
      other = undefined;

      // The second key approves and publishes.
      await signOut(page);
      await signIn(page, second.api_key);
      await page.goto("/console/governance/versions/1");
      await page.getByRole("button", { name: "Approve" }).click();
      await expect.poll(() => page.getByTestId("graph-state").textContent()).toBe("approved");
      expect(await page.getByTestId("graph-approver").textContent()).toBe(second.key_id);
      await page.getByRole("button", { name: "Publish" }).click();
      await expect.poll(() => page.getByTestId("graph-state").textContent()).toBe("active");
      await checkPage(page, "06-graph-published");
      await signOut(page);

      // --- Policies: author, four eyes, publish -----------------------------------------------
      await signIn(page, org.apiKey);
      await navTo(page, "Policies");
      await page.getByRole("heading", { name: "Policies", level: 1 }).waitFor();
      await page.locator('[data-policy="starter"]').waitFor();
      await checkPage(page, "07-policies");
      await page.getByRole("link", { name: "New policy" }).click();
      await page.getByRole("heading", { name: "New policy" }).waitFor();
      await page.getByLabel("Policy key").fill("payments");
      await page.getByLabel("Description").fill("Vendor payments within delegated authority.");
      const editor = page.getByLabel("Rules document (YAML)");
      // A YAML syntax error is caught as it is typed, at its line; the document cannot be sent.
      await editor.fill("actions: [vendor_payment\nrules: []\n");
      await expect.poll(() => page.getByTestId("yaml-check").textContent()).toContain("YAML syntax error");
      await page.getByTestId("yaml-preview").getByTestId("line-note").first().waitFor();
      expect(await page.getByRole("button", { name: "Create policy" }).isDisabled()).toBe(true);
      // Valid YAML the API refuses: an outcome that does not exist, on line 6.
      const rules = (outcome: string) =>
        `actions: [vendor_payment]\nrules:\n  - id: hard_cap\n    when:\n      amount: { gt: 1000000 }\n    outcome: ${outcome}\n    reason: amount_over_hard_cap\n  - id: authority\n    authority: true\n`;
      await editor.fill(rules("MAYBE"));
      await page.getByRole("button", { name: "Create policy" }).click();
      const located = page.getByTestId("yaml-preview").locator('[data-testid="line-note"][data-line="6"]');
      await located.waitFor();
      expect(await located.textContent()).toContain("outcome");
      await checkPage(page, "08-policy-error-at-line");
      await editor.fill(rules("DENY"));
      await page.getByRole("button", { name: "Create policy" }).click();
      await page.getByRole("heading", { name: "payments version 1" }).waitFor();
      expect(await page.getByTestId("policy-state").textContent()).toBe("draft");
      // The rules document and the generated Rego, highlighted.
      await page.getByTestId("policy-rego").locator(".token.keyword").first().waitFor();
      expect(await page.getByTestId("policy-rego").textContent()).toContain("package mandate.policies.payments");
      expect(await page.getByTestId("policy-source").locator(".token").count()).toBeGreaterThan(0);
      await page.getByRole("button", { name: "Submit for review" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("in_review");
      // This key authored the version: approving is disabled for it, with the reason.
      await expect.poll(() => page.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      expect(await page.getByTestId("approve-reason").textContent()).toContain("this key authored it");
      await checkPage(page, "09-policy-in-review");

      // The second key approves and publishes; then the agent's Intents are recorded, for the replay.
      await signOut(page);
      await signIn(page, second.api_key);
      await page.goto("/console/policies/payments/versions/1");
      await page.getByRole("button", { name: "Approve" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("approved");
      await page.getByRole("button", { name: "Publish" }).click();
      await expect.poll(() => page.getByTestId("policy-state").textContent()).toBe("active");
      expect(await page.getByTestId("policy-approver").textContent()).toBe(second.key_id);
      await checkPage(page, "10-policy-published");

      const client = new MandateClient({ base_url: svc.baseUrl });
      const small = await client.submitIntent(agent, { action: "vendor_payment", amount: 500, currency: "USD", counterparty: "ACME Corp" });
      expect(small).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority" });
      const mid = await client.submitIntent(agent, { action: "vendor_payment", amount: 2_500, currency: "USD", counterparty: "ACME Corp" });
      expect(mid).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "requires_approval" });

      // Dry run: the outcome, each rule's explanation and the trace.
      await page.getByRole("link", { name: "Dry-run an Intent against this version" }).click();
      await page.getByRole("heading", { name: "Dry-run an Intent" }).waitFor();
      expect(await page.getByLabel("Policy versions instead of the active ones (optional)").inputValue()).toBe("payments=1");
      // The agent is picked from the organization's active agents; the example Intent asks for 2,500 USD.
      await page.getByLabel("Agent").selectOption(agent.agent_id);
      await expect.poll(async () => JSON.parse(await page.getByLabel("Intent (JSON)").inputValue())).toMatchObject({ agent_id: agent.agent_id, amount: 2_500, currency: "USD" });
      await page.getByRole("button", { name: "Evaluate" }).click();
      await page.getByTestId("dry-run-result").waitFor();
      expect(await page.getByTestId("dry-run-outcome").textContent()).toBe("HUMAN_REVIEW");
      expect(await page.getByTestId("dry-run-reason").textContent()).toBe("requires_approval");
      const hardCap = page.getByTestId("dry-run-rules").locator('[data-rule="hard_cap"]');
      expect(await hardCap.textContent()).toMatch(/not fired: amount gt 1000000 did not\s*hold \(the Intent had 2500\)/);
      expect(await page.getByTestId("dry-run-trace").textContent()).toContain("payments");
      await checkPage(page, "11-dry-run");

      // A second version, edited from the first: small payments denied. The replay shows the flip.
      await page.goto("/console/policies/payments");
      await page.getByRole("link", { name: "New version" }).click();
      await page.getByRole("heading", { name: "New version of payments" }).waitFor();
      expect(await page.getByLabel("Rules document (YAML)").inputValue()).toContain("hard_cap");
      await page
        .getByLabel("Rules document (YAML)")
        .fill(`${rules("DENY").replace("rules:\n", "rules:\n  - id: no_small_payments\n    when:\n      amount: { lt: 1000 }\n    outcome: DENY\n    reason: below_minimum\n")}`);
      await page.getByRole("button", { name: "Save draft" }).click();
      await page.getByRole("heading", { name: "payments version 2" }).waitFor();
      await page.getByRole("button", { name: "Replay" }).click();
      const replay = page.getByTestId("replay-result");
      await replay.waitFor();
      expect(await page.getByTestId("flip-count").textContent()).toBe("1");
      const flip = page.getByTestId("flips").locator(`[data-decision-id="${small.decision_id}"]`);
      expect(await flip.textContent()).toMatch(/ALLOW within_delegated_authority\s*DENY below_minimum/);
      await checkPage(page, "12-replay");

      // Disable, four eyes: the request waits for another approver.
      await page.goto("/console/policies/payments");
      await page.getByLabel("Note (recorded in the evidence)").fill("Pausing payments for the audit.");
      await page.getByRole("button", { name: "Disable" }).click();
      // It asks first, saying what disabling does.
      const confirmDisable = page.getByRole("dialog", { name: "Disable payments?" });
      await confirmDisable.waitFor();
      expect(await confirmDisable.textContent()).toContain("The policy leaves the bundle");
      await confirmDisable.getByRole("button", { name: "Disable" }).click();
      const change = page.getByTestId("policy-change");
      await change.waitFor();
      expect(await change.textContent()).toContain("Disable pending approval");
      expect(await change.textContent()).toContain(second.key_id);
      await checkPage(page, "13-disable-pending");
      // Another identity holding POLICY_APPROVER makes the same request: applied, the policy has no active version.
      await signOut(page);
      await signIn(page, org.apiKey);
      await page.goto("/console/policies/payments");
      await page.getByLabel("Note (recorded in the evidence)").fill("Agreed.");
      await page.getByRole("button", { name: "Disable" }).click();
      await page.getByRole("dialog", { name: "Disable payments?" }).getByRole("button", { name: "Disable" }).click();
      await expect.poll(() => page.getByTestId("policy-change").textContent()).toContain("Disable applied");
      await expect.poll(() => page.getByTestId("active-version").textContent()).toBe("none");
      await checkPage(page, "14-disable-applied");

      // A second graph version compared with the active one; then the pages at phone width.
      await page.goto("/console/governance");
      // Deleting asks first: cancelled, nothing changes; confirmed, the document goes.
      await page.getByRole("button", { name: "Delete doa.csv" }).click();
      const confirmDelete = page.getByRole("dialog", { name: "Delete doa.csv?" });
      await confirmDelete.getByRole("button", { name: "Cancel" }).click();
      expect(await page.getByTestId("documents").locator("tbody tr").count()).toBe(3);
      await page.getByRole("button", { name: "Delete doa.csv" }).click();
      await confirmDelete.getByRole("button", { name: "Delete document" }).click();
      await expect.poll(() => page.getByTestId("documents").locator("tbody tr").count()).toBe(2);
      await page.getByRole("button", { name: "Generate graph version" }).click();
      await page.getByTestId("generated").getByRole("link", { name: "2" }).click();
      await page.getByRole("heading", { name: "Authority graph version 2" }).waitFor();
      await expect.poll(() => page.getByTestId("diff-summary").textContent()).toBe("Against version 1: limits +0 −3; delegations +0 −1.");
      await checkPage(page, "15-graph-diff");
      await page.setViewportSize({ width: 390, height: 844 });
      for (const [path, heading, name] of [
        ["/console/governance", "Governance", "16-phone-governance"],
        ["/console/governance/versions/1", "Authority graph version 1", "17-phone-graph-version"],
        ["/console/policies", "Policies", "18-phone-policies"],
        ["/console/policies/payments/versions/2", "payments version 2", "19-phone-policy-version"],
      ] as const) {
        await page.goto(path);
        await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
        await checkPage(page, name);
      }

      // Connect's 400 (INVALID_ARGUMENT: the refused document and rules), 403 and 404 from the permission probes.
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await other?.close();
      await context.close();
    }
  });
});
