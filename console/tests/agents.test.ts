import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { AgentKey, MandateClient, agentIdentity } from "@mandate/client";
import { uniqueEmail, type TestService } from "../../test/support/service.js";
import { checkPage, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signOut, tabTo } from "./browser.js";

/*
 * Issue 22, the Agents pages, in Debian's Chromium against a real service: in a sandbox
 * organization, a malformed public key is refused with the error under its field; an agent is
 * registered by pasting the key generated here; the list filters it by state and finds it by
 * search; its page shows its principal, labels, certificate, heartbeat and audit trail, and only
 * the transitions its state allows: activate, suspend, reactivate, then revoke, cancelled once in
 * its confirmation dialog (by the keyboard) and confirmed the second time (retire asks too, and
 * Escape dismisses it). The key is rotated by pasting a PEM public key. A transition the agent's
 * state no longer allows (changed elsewhere while the page was open) is refused with the API's
 * error and the page reads the agent again. A key without AGENT_ADMIN sees no write, with the
 * reason; with 102 agents the list shows a page and loads the next on request, and a search reads
 * both. Every page is screenshotted (console/test-output/agents/) and checked by axe-core, then
 * again at phone width.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

const RUN = "agents";

/** The lifecycle buttons the agent page offers, in order. */
async function transitionButtons(page: Page): Promise<string[]> {
  const group = page.getByTestId("transitions");
  if ((await group.count()) === 0) return [];
  return (await group.getByRole("button").allTextContents()).map((s) => s.trim());
}

/** The agents listed, by their data-agent-id. */
async function listedIds(page: Page): Promise<string[]> {
  return page.getByTestId("agents").locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-agent-id") ?? ""));
}

/** An Ed25519 public key as PEM (SubjectPublicKeyInfo), what `openssl pkey -pubout` prints. */
function pem(key: AgentKey): string {
  const der = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(key.public_key_bytes)]);
  return `-----BEGIN PUBLIC KEY-----\n${der.toString("base64")}\n-----END PUBLIC KEY-----\n`;
}

async function expectState(page: Page, state: string, buttons: string[]): Promise<void> {
  await expect.poll(() => page.getByTestId("agent-state").textContent()).toBe(state);
  await expect.poll(() => transitionButtons(page)).toEqual(buttons);
}

const kinds = (page: Page): Promise<string[]> =>
  page.getByTestId("audit-trail").locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-kind") ?? ""));

describe("the console's agents pages", () => {
  it("register by pasting a public key → list, filter, search → activate, suspend, reactivate, revoke with confirmation", async () => {
    const sandbox = await new MandateClient({ base_url: svc.baseUrl }).createSandbox(uniqueEmail("agents"));
    const admin = new MandateClient({ base_url: svc.baseUrl, api_key: sandbox.api_key });
    const suffix = randomUUID().slice(0, 8);
    const [pat, reader] = await Promise.all([
      admin.createPrincipal({ display_name: "Pat Payables", kind: "person", external_ref: `pat-${suffix}` }),
      admin.createApiKey("read only", ["EVIDENCE_READ"]),
    ]);
    // Another agent, already active, for the filters to tell apart.
    const ledger = await admin.registerAgent({ name: `ledger-bot-${suffix}`, principal_id: pat.principal_id, key: await AgentKey.generate() });
    await admin.activate(ledger.agent_id);
    const key = await AgentKey.generate();
    const name = `payables-bot-${suffix}`;

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await signIn(page, sandbox.api_key);
      await navTo(page, "Agents");
      await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
      await page.locator(`[data-agent-id="${ledger.agent_id}"]`).waitFor();
      await checkPage(page, RUN, "01-agents");

      // Register: a malformed key first, refused by the API with the error under the field.
      await page.getByRole("link", { name: "Register an agent" }).click();
      await page.getByRole("heading", { name: "Register an agent" }).waitFor();
      await page.getByLabel("Name").fill(name);
      await page.getByLabel("Acts for (principal)").selectOption({ label: `Pat Payables (pat-${suffix})` });
      const publicKey = page.getByLabel("Public key");
      await publicKey.fill("ed25519:base64:not-a-key");
      await page.getByLabel("Owner").fill("finance-ops");
      await page.getByLabel("Environment").fill("production");
      await page.getByRole("button", { name: "Register agent" }).click();
      const fieldErr = page.getByTestId("field-error");
      await fieldErr.waitFor();
      expect(await fieldErr.textContent()).toBe("Public key must be ed25519:base64:<standard base64 of 32 bytes>.");
      expect(await publicKey.getAttribute("aria-invalid")).toBe("true");
      const alert = page.getByRole("alert");
      expect(await alert.textContent()).toContain("validation_failed");
      expect(await alert.textContent()).toContain("public_key");
      await checkPage(page, RUN, "02-register-malformed-key");

      // The key generated here, pasted as the clients print it: registered, and its page opens.
      await publicKey.fill(key.public_key);
      await page.getByRole("button", { name: "Register agent" }).click();
      await page.getByRole("heading", { name: `Agent ${name}` }).waitFor();
      const agentId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop()!);
      expect(agentId).toMatch(/^agt_/);
      await expectState(page, "registered", ["Activate", "Revoke", "Retire"]);
      expect(await page.getByTestId("principal").textContent()).toContain(`Pat Payables (pat-${suffix})`);
      expect(await page.getByTestId("owner").textContent()).toBe("finance-ops");
      expect(await page.getByTestId("environment").textContent()).toBe("production");
      expect(await page.getByTestId("business-unit").textContent()).toBe("—");
      expect(await page.getByTestId("heartbeat").textContent()).toContain("never");
      expect(await page.getByTestId("public-key").allTextContents()).toEqual([key.public_key]);
      await expect.poll(() => kinds(page)).toEqual(["agent.registered"]);
      await checkPage(page, RUN, "03-agent-registered");

      // The list: both agents; the state filter and the search tell them apart.
      await page.getByRole("link", { name: "← Agents" }).click();
      await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
      await expect.poll(() => listedIds(page)).toEqual([ledger.agent_id, agentId]);
      const stateFilter = page.getByLabel("State");
      for (const [state, ids] of [
        ["registered", [agentId]],
        ["active", [ledger.agent_id]],
        ["", [ledger.agent_id, agentId]],
      ] as const) {
        await stateFilter.selectOption(state);
        await expect.poll(() => listedIds(page)).toEqual(ids);
      }
      await stateFilter.selectOption("suspended");
      await page.getByText("No agent matches these filters.").waitFor();
      expect(page.url()).toContain("state=suspended");
      await checkPage(page, RUN, "04-agents-filter-empty");
      await stateFilter.selectOption("");
      const search = page.getByLabel("Search");
      await search.fill(`PAYABLES-BOT-${suffix}`);
      await expect.poll(() => listedIds(page)).toEqual([agentId]);
      // By the principal's name: both act for Pat.
      await search.fill("pat payables");
      await expect.poll(() => listedIds(page)).toEqual([ledger.agent_id, agentId]);
      await search.fill(ledger.agent_id);
      await expect.poll(() => listedIds(page)).toEqual([ledger.agent_id]);
      await search.fill("payables-bot");
      await stateFilter.selectOption("registered");
      await expect.poll(() => listedIds(page)).toEqual([agentId]);
      expect(await page.getByTestId("agent-count").textContent()).toBe("1 of 2 agents match");
      await checkPage(page, RUN, "05-agents-filtered");

      // The lifecycle, each transition a button of its own; the others are not offered.
      await page.getByRole("link", { name }).click();
      await page.getByRole("heading", { name: `Agent ${name}` }).waitFor();
      await page.getByLabel("Reason (optional, recorded in the audit record)").fill("Go-live approved by finance.");
      await page.getByRole("button", { name: "Activate" }).click();
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      expect(await page.getByTestId("transition-done").textContent()).toBe("Activated: the agent is now active.");
      // A heartbeat from the agent itself (signed by its key) shows as its last sign of life.
      const registered = await admin.getAgent(agentId);
      await new MandateClient({ base_url: svc.baseUrl }).heartbeat(agentIdentity(registered, key));
      await page.reload();
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      await expect.poll(() => page.getByTestId("heartbeat").locator("time").count()).toBe(1);
      await page.getByRole("button", { name: "Suspend" }).click();
      await expectState(page, "suspended", ["Reactivate", "Revoke", "Retire"]);
      await checkPage(page, RUN, "06-agent-suspended");
      await page.getByRole("button", { name: "Reactivate" }).click();
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);

      // The key rotated by pasting a PEM public key: the old certificate shows as replaced.
      const next = await AgentKey.generate();
      await page.getByLabel("New public key").fill(pem(next));
      await page.getByRole("button", { name: "Rotate key" }).click();
      await page.getByText("The key is rotated").waitFor();
      await expect.poll(() => page.getByTestId("public-key").allTextContents()).toEqual([next.public_key, key.public_key]);
      expect(await page.getByTestId("certificate-status").allTextContents()).toEqual(["current, verifying", "replaced"]);

      // Revoke, by the keyboard: the dialog opens with the focus on Cancel; Enter cancels, nothing changes.
      const revoke = page.getByTestId("transitions").getByRole("button", { name: "Revoke" });
      await revoke.focus();
      await page.keyboard.press("Enter");
      const dialog = page.getByRole("dialog", { name: `Revoke agent ${name}?` });
      await dialog.waitFor();
      expect(await dialog.getByRole("button", { name: "Cancel" }).evaluate((el) => el === document.activeElement)).toBe(true);
      await checkPage(page, RUN, "07-revoke-confirmation");
      await page.keyboard.press("Enter");
      await dialog.waitFor({ state: "hidden" });
      expect((await admin.getAgent(agentId)).state).toBe("active");
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      // Retire asks too; Escape dismisses it.
      await page.getByTestId("transitions").getByRole("button", { name: "Retire" }).click();
      const retireDialog = page.getByRole("dialog", { name: `Retire agent ${name}?` });
      await retireDialog.waitFor();
      await page.keyboard.press("Escape");
      await retireDialog.waitFor({ state: "hidden" });
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      // The second time, confirmed: revoked for good, no transition offered.
      await revoke.click();
      await dialog.getByRole("button", { name: "Revoke agent" }).click();
      await expectState(page, "revoked", []);
      expect(await page.getByTestId("no-transition").textContent()).toBe("The agent is revoked: no transition leaves this state.");
      expect(await page.getByTestId("certificate-status").first().textContent()).toBe("revoked");
      expect(await page.getByRole("button", { name: "Rotate key" }).count()).toBe(0);
      await expect.poll(() => kinds(page)).toEqual(["agent.registered", "agent.activated", "agent.suspended", "agent.reactivated", "agent.key_rotated", "agent.revoked"]);
      const activated = page.getByTestId("audit-trail").locator('tr[data-kind="agent.activated"]');
      expect(await activated.textContent()).toContain("registered → active");
      expect(await activated.textContent()).toContain("Go-live approved by finance.");
      expect((await admin.getAgent(agentId)).state).toBe("revoked");
      await checkPage(page, RUN, "08-agent-revoked");

      // A page left open while the agent changed elsewhere: the API refuses, the page says so and reads the agent again.
      await page.goto(`/console/agents/${ledger.agent_id}`);
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      await admin.suspend(ledger.agent_id);
      await page.getByRole("button", { name: "Suspend" }).click();
      const refused = page.getByRole("alert").filter({ hasText: "Suspend was refused" });
      await refused.waitFor();
      expect(await refused.textContent()).toContain("invalid_transition");
      await expectState(page, "suspended", ["Reactivate", "Revoke", "Retire"]);
      await page.getByRole("button", { name: "Reactivate" }).click();
      await expectState(page, "active", ["Suspend", "Revoke", "Retire"]);
      expect(await page.getByRole("alert").count()).toBe(0);

      // Phone width: the list, an agent, the registration form.
      await page.setViewportSize({ width: 390, height: 844 });
      for (const [path, heading, shot] of [
        ["/console/agents", "Agents", "09-phone-agents"],
        [`/console/agents/${ledger.agent_id}`, `Agent ${ledger.name}`, "10-phone-agent"],
        ["/console/agents/new", "Register an agent", "11-phone-register"],
      ] as const) {
        await page.goto(path);
        await page.getByRole("heading", { name: heading, level: 1 }).waitFor();
        await checkPage(page, RUN, shot);
      }
      await tabTo(page, page.getByLabel("Name"));

      // A key without AGENT_ADMIN: the agent and its audit trail, no write, and why.
      await page.setViewportSize({ width: 1280, height: 800 });
      await signOut(page);
      await signIn(page, reader.api_key);
      await page.goto(`/console/agents/${ledger.agent_id}`);
      await page.getByRole("heading", { name: `Agent ${ledger.name}` }).waitFor();
      await page.getByTestId("no-admin").waitFor();
      expect(await page.getByTestId("no-admin").textContent()).toContain("This key lacks AGENT_ADMIN");
      expect(await transitionButtons(page)).toEqual([]);
      expect(await page.getByRole("button", { name: "Save labels" }).count()).toBe(0);
      await expect.poll(() => kinds(page)).toEqual(["agent.registered", "agent.activated", "agent.suspended", "agent.reactivated"]);
      await checkPage(page, RUN, "12-agent-read-only");
      // Pagination: 100 more agents make two pages. A search reads every page; otherwise one more page a click.
      const register = async (n: string) => admin.registerAgent({ name: n, principal_id: pat.principal_id, key: await AgentKey.generate() });
      for (let i = 0; i < 98; i += 14) await Promise.all(Array.from({ length: 14 }, (_, j) => register(`bulk-${i + j}-${suffix}`)));
      await register(`late-1-${suffix}`);
      await register(`late-2-${suffix}`);
      await page.goto(`/console/agents?q=late-`);
      await expect.poll(() => page.getByTestId("agent-count").textContent()).toBe("2 of 102 agents match");
      expect(await page.getByTestId("agents").locator("tbody tr th a").allTextContents()).toEqual([`late-1-${suffix}`, `late-2-${suffix}`]);
      await page.goto("/console/agents");
      await expect.poll(() => page.getByTestId("agent-count").textContent()).toBe("100 agents; more to load");
      await page.getByRole("button", { name: "Show more agents" }).click();
      await expect.poll(() => page.getByTestId("agent-count").textContent()).toBe("102 agents");
      expect(await page.getByRole("button", { name: "Show more agents" }).count()).toBe(0);
      await page.locator(`[data-agent-id="${agentId}"]`).waitFor();
      expect(await page.getByRole("link", { name: "Register an agent" }).count()).toBe(0);
      expect(await page.getByTestId("no-admin").textContent()).toContain("This key lacks AGENT_ADMIN");
      await page.goto("/console/agents/new");
      await page.getByText("This key lacks AGENT_ADMIN: it cannot register agents.").waitFor();

      // Connect's 400 (the malformed key) and the permission probes' 403 and 404.
      expectCleanConsole(problems, [400, 403, 404]);
    } finally {
      await context.close();
    }
  });
});

