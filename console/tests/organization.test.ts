import { randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { TestService } from "../../test/support/service.js";
import { checkPage, copySecret, expectCleanConsole, navTo, openPage, serviceAndBrowser, signIn, signUpSandbox } from "./browser.js";

/*
 * Issue 22, the API keys and principals pages, in Debian's Chromium against a real service. In a
 * sandbox organization: a key's form shows the API's field errors in place (no name, then no
 * permission); a key is created, its secret shown once and copied, and signing in with it in a
 * fresh browser context shows exactly its permissions (no ORG_ADMIN: no API keys link, the page
 * refused with the reason, principals readable but not creatable). It is listed, then revoked
 * behind a confirmation dialog (cancelled once, confirmed the second time), and the sign-in page
 * refuses it. Principals: the page says governance documents do not create them; a missing kind
 * and a malformed external ref are refused under their fields, a taken ref with the API's 409;
 * two are created and listed. Every page is screenshotted (console/test-output/organization/)
 * and checked by axe-core, then again at phone width.
 */

let svc: TestService;
let browser: Browser;

serviceAndBrowser((s, b) => ([svc, browser] = [s, b]));

const RUN = "organization";

/** The keys listed: key id → state cell text. */
async function keyStates(page: Page): Promise<Record<string, string>> {
  const rows = await page
    .getByTestId("api-keys")
    .locator("tbody tr")
    .evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-key-id") ?? "", tr.querySelector('[data-testid="key-state"]')?.textContent ?? ""] as const));
  return Object.fromEntries(rows);
}

/** The sign-in page's answer to `apiKey` in a fresh context (no session): the page's alert text. */
async function refusedSignIn(apiKey: string): Promise<string> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: svc.baseUrl });
  const { page, problems } = await openPage(context);
  try {
    await page.goto("/console/sign-in");
    await page.getByLabel("API key").fill(apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    const alert = page.getByRole("alert");
    await alert.waitFor();
    await checkPage(page, RUN, "07-sign-in-revoked");
    expectCleanConsole(problems, [401]);
    return (await alert.textContent()) ?? "";
  } finally {
    await context.close();
  }
}

describe("API keys and principals in the console", () => {
  it("creates a key (secret copied, its permissions seen in a fresh sign-in), revokes it after a cancelled confirmation, and creates principals", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: svc.baseUrl });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: svc.baseUrl });
    const { page, problems } = await openPage(context);
    try {
      await page.goto("/console/sign-up");
      const suffix = randomUUID().slice(0, 8);
      const { apiKey: sandboxKey } = await signUpSandbox(page, `organization-${suffix}@example.com`);
      await page.getByRole("button", { name: "Continue with this key" }).click();
      await page.getByRole("link", { name: "Manage the API keys" }).click();
      await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
      await expect.poll(async () => Object.keys(await keyStates(page)).length).toBe(1);
      const [sandboxKeyId] = Object.keys(await keyStates(page));
      await checkPage(page, RUN, "01-api-keys");

      // The API's field errors, under their fields: no name, then no permission.
      await page.getByRole("button", { name: "Create key" }).click();
      await expect.poll(() => page.getByTestId("field-error").allTextContents()).toEqual(["Name must not be empty."]);
      expect(await page.getByLabel("Name", { exact: true }).getAttribute("aria-invalid")).toBe("true");
      await page.getByLabel("Name", { exact: true }).fill("reviewer key");
      await page.getByRole("button", { name: "Create key" }).click();
      await expect.poll(() => page.getByTestId("field-error").allTextContents()).toEqual(["Permissions: at least one permission."]);
      await checkPage(page, RUN, "02-api-key-field-error");

      // Created with three permissions, each checkbox described by its meaning; the secret shown once and copied.
      const granted = ["POLICY_APPROVER", "REVIEWER", "DECISION_READ"];
      for (const p of granted) await page.getByLabel(p, { exact: true }).check();
      expect(await page.getByLabel("REVIEWER", { exact: true }).getAttribute("aria-describedby")).toBeTruthy();
      await page.getByText("approve or reject human reviews").waitFor();
      await page.getByRole("button", { name: "Create key" }).click();
      const copied = await copySecret(page, "New key's secret");
      const keyId = (await page.getByTestId("created-key-id").textContent())!;
      expect(await page.getByTestId("created-key").textContent()).toContain(`Created key reviewer key (${keyId}) with ${granted.join(", ")}.`);
      expect(await page.getByTestId("field-error").count()).toBe(0);
      await expect.poll(() => keyStates(page)).toEqual({ [sandboxKeyId!]: "active", [keyId]: "active" });
      const row = page.locator(`tr[data-key-id="${keyId}"]`);
      expect(await row.getByTestId("key-permissions").locator("code").allTextContents()).toEqual(granted);
      await checkPage(page, RUN, "03-api-key-created");
      await page.getByRole("button", { name: "Done: hide the secret" }).click();
      await page.getByLabel("New key's secret").waitFor({ state: "detached" });

      // The copied secret signs in elsewhere and holds exactly what it was given.
      const other = await browser.newContext({ viewport: { width: 1280, height: 800 }, baseURL: svc.baseUrl });
      const second = await openPage(other);
      try {
        await signIn(second.page, copied);
        await second.page.locator('[data-permission="REVIEWER"][data-held="true"]').waitFor();
        const held = await second.page.locator('[data-held="true"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-permission")));
        expect(held).toEqual(granted);
        await second.page.getByTestId("no-org-admin").waitFor();
        expect(await second.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "API keys" }).count()).toBe(0);
        await checkPage(second.page, RUN, "04-signed-in-with-new-key");
        await second.page.goto("/console/api-keys");
        await second.page.getByRole("heading", { name: "Not available to this key" }).waitFor();
        expect(await second.page.getByRole("main").textContent()).toContain("ORG_ADMIN");
        await navTo(second.page, "Principals");
        await second.page.getByTestId("no-admin").waitFor();
        expect(await second.page.getByRole("button", { name: "Create principal" }).count()).toBe(0);
        expectCleanConsole(second.problems, [400, 403, 404]);
      } finally {
        await other.close();
      }

      // Revoke: cancelled once (nothing changes), confirmed the second time.
      const dialog = page.getByRole("dialog", { name: "Revoke key reviewer key?" });
      await row.getByRole("button", { name: "Revoke reviewer key" }).click();
      await dialog.waitFor();
      expect(await dialog.textContent()).toContain("immediate and permanent");
      await checkPage(page, RUN, "05-revoke-dialog");
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await dialog.waitFor({ state: "hidden" });
      expect((await keyStates(page))[keyId]).toBe("active");
      await row.getByRole("button", { name: "Revoke reviewer key" }).click();
      await dialog.getByRole("button", { name: "Revoke key" }).click();
      await page.getByTestId("revoke-done").waitFor();
      expect(await page.getByTestId("revoke-done").textContent()).toBe("Revoked key reviewer key: the API refuses it from now on.");
      expect(await page.getByTestId("revoke-done").evaluate((el) => el === document.activeElement)).toBe(true);
      await expect.poll(async () => (await keyStates(page))[keyId]).toMatch(/^revoked /);
      expect((await keyStates(page))[sandboxKeyId!]).toBe("active");
      expect(await row.getByRole("button").count()).toBe(0);
      await checkPage(page, RUN, "06-api-key-revoked");

      // The revoked key is refused on sign-in.
      const refusal = await refusedSignIn(copied);
      expect(refusal).toContain("Sign-in failed");
      expect(refusal).toContain("unknown_key");

      // Principals: the page says where they come from; field errors in place; two created and listed.
      await navTo(page, "Principals");
      await page.getByRole("heading", { name: "Principals", level: 1 }).waitFor();
      expect(await page.getByTestId("governance-note").textContent()).toContain("Governance documents do not create principals");
      await page.getByText("No principal yet.").waitFor();
      await checkPage(page, RUN, "08-principals-empty");
      await page.getByLabel("Display name").fill("Pat Payables");
      await page.getByRole("button", { name: "Create principal" }).click();
      await expect.poll(() => page.getByTestId("field-error").allTextContents()).toEqual(["Kind: a kind is required."]);
      expect(await page.getByLabel("Kind").getAttribute("aria-invalid")).toBe("true");
      await page.getByLabel("Kind").selectOption({ label: "Person" });
      await page.getByLabel("External ref").fill("pat payables!");
      await page.getByRole("button", { name: "Create principal" }).click();
      await expect.poll(() => page.getByTestId("field-error").allTextContents()).toEqual([
        "External ref 1..128 characters: letters, digits and . _ : @ / -.",
      ]);
      await checkPage(page, RUN, "09-principal-field-error");
      const patRef = `pat-${suffix}`;
      await page.getByLabel("External ref").fill(patRef);
      await page.getByRole("button", { name: "Create principal" }).click();
      await page.getByTestId("principal-created").waitFor();
      expect(await page.getByTestId("field-error").count()).toBe(0);
      await page.getByLabel("Display name").fill("Finance");
      await page.getByLabel("Kind").selectOption({ label: "Organizational unit" });
      await page.getByRole("button", { name: "Create principal" }).click();
      await expect.poll(() => page.getByTestId("principal-created").textContent()).toContain("Created Finance");
      const rows = () =>
        page.getByTestId("principals").locator("tbody tr").evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("th, td")].slice(0, 3).map((c) => c.textContent)));
      await expect.poll(rows).toEqual([
        ["Pat Payables", "Person", patRef],
        ["Finance", "Organizational unit", "—"],
      ]);
      const ids = await page.getByTestId("principals").locator("tbody tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-principal-id")));
      for (const id of ids) expect(id).toMatch(/^prn_/);
      // A ref already taken: the API's 409, shown with its message.
      await page.getByLabel("Display name").fill("Pat again");
      await page.getByLabel("Kind").selectOption({ label: "Person" });
      await page.getByLabel("External ref").fill(patRef);
      await page.getByRole("button", { name: "Create principal" }).click();
      const refused = page.getByRole("alert").filter({ hasText: "The principal was not created" });
      await refused.waitFor();
      expect(await refused.textContent()).toContain("already_exists");
      await checkPage(page, RUN, "10-principals");

      // Phone width: both pages fit (the tables scroll in their own box), and the revoke dialog too; Escape dismisses it.
      await page.setViewportSize({ width: 390, height: 844 });
      const sideways = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      await checkPage(page, RUN, "11-phone-principals");
      expect(await sideways(), "the principals page scrolls sideways at phone width").toBe(0);
      await signIn(page, sandboxKey);
      await navTo(page, "API keys");
      await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
      await page.getByTestId("api-keys").waitFor();
      await checkPage(page, RUN, "12-phone-api-keys");
      expect(await sideways(), "the API keys page scrolls sideways at phone width").toBe(0);
      await page.locator(`tr[data-key-id="${sandboxKeyId}"]`).getByRole("button", { name: /^Revoke / }).click();
      const own = page.getByRole("dialog");
      await own.waitFor();
      await checkPage(page, RUN, "13-phone-revoke-dialog");
      await page.keyboard.press("Escape");
      await own.waitFor({ state: "hidden" });
      expect((await keyStates(page))[sandboxKeyId!]).toBe("active");

      // Probes (400, 403, 404), the refused creations (409, 422); no script error.
      expectCleanConsole(problems, [400, 403, 404, 409, 422]);
    } finally {
      await context.close();
    }
  });
});
