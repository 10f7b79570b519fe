import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { AgentKey, agentIdentity, MandateClient } from "@mandate/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/process.js";
import { startService, type TestService } from "../support/service.js";
import { waitFor } from "../support/wait.js";
import { pythonVenv, ROOT, run, type Ran } from "./clients-python-env.js";

/*
 * Issue 8: the examples/ walkthroughs of the spec's eight onboarding steps run
 * against a live service (MANDATE_BASE_URL), in Python and in TypeScript, and
 * reach the same decisions: what the README shows is what runs.
 */

let svc: TestService;
let python: string;

beforeAll(async () => {
  [svc, python] = await Promise.all([startService(), pythonVenv()]);
}, 300_000);
afterAll(() => svc?.close());

/** The decisions the walkthrough's payments policy and authority graph must produce. */
const EXPECTED = [
  { amount: 500, outcome: "ALLOW", reason: "within_delegated_authority", status: null },
  { amount: 2500, outcome: "HUMAN_REVIEW", reason: "requires_approval", status: "PENDING" },
  { amount: 75000, outcome: "DENY", reason: "exceeds_approval_limit", status: null },
  { amount: 100, outcome: "DENY", reason: "blocked_counterparty", status: null },
];

function checkWalkthrough(res: Ran): void {
  const output = `${res.stdout}\n${res.stderr}`;
  expect(res.code, output).toBe(0);
  for (let n = 1; n <= 8; n++) expect(res.stdout, output).toContain(`[${n}/8]`);
  const summary = JSON.parse(res.stdout.trim().split("\n").at(-1)!);
  expect(summary.organization_id).toMatch(/^org_/);
  expect(summary.agent_state_after_registration).toBe("registered");
  expect(summary.decisions).toHaveLength(EXPECTED.length);
  summary.decisions.forEach((d: Record<string, unknown>, i: number) => {
    expect(d).toMatchObject(EXPECTED[i]!);
    expect(d.decision_id).toMatch(/\S/);
    expect(d.evidence_id).toMatch(/\S/);
  });
  expect(summary.capability_verified).toBe(true);
  expect(summary.evidence_kind).toBe("decision");
}

describe("onboarding walkthrough (eight steps, sandbox organization)", () => {
  it("examples/python/onboarding.py", async () => {
    const res = await run(python, [path.join(ROOT, "examples/python/onboarding.py")], {
      env: { MANDATE_BASE_URL: svc.baseUrl, PYTHONDONTWRITEBYTECODE: "1" },
      timeoutMs: 90_000,
    });
    checkWalkthrough(res);
  }, 120_000);

  it("examples/typescript/onboarding.ts", async () => {
    const res = await run(process.execPath, [path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), path.join(ROOT, "examples/typescript/onboarding.ts")], {
      env: { MANDATE_BASE_URL: svc.baseUrl },
      timeoutMs: 90_000,
    });
    checkWalkthrough(res);
  }, 120_000);
});

/* ------------------------------------------------------------------------------------------ */
/* Issue 21: the README's Events section and its webhook receivers, run for real.               */

const README = () => readFileSync(path.join(ROOT, "README.md"), "utf8");

/** The README's "## Events (early access)" section. */
function eventsSection(): string {
  const readme = README();
  const start = readme.indexOf("## Events (early access)");
  if (start < 0) throw new Error("README.md has no ## Events (early access) section");
  const end = readme.indexOf("\n## ", start + 3);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** The fenced blocks of `lang` in the README's Events section, in order. */
function blocks(lang: string): string[] {
  return [...eventsSection().matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]!);
}

/** A process whose output lines the test reads as they come (stdout and stderr). */
function startProcess(command: string, args: string[], env: Record<string, string>, options: { detached?: boolean } = {}) {
  const child: ChildProcess = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: options.detached ?? false });
  const lines: string[] = [];
  let pending = "";
  const onData = (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split("\n");
    pending = parts.pop()!;
    lines.push(...parts);
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    lines,
    /** The parsed JSON lines. */
    json: () => lines.flatMap((l) => (l.startsWith("{") ? [JSON.parse(l) as Record<string, any>] : [])),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // A detached child leads its own process group (bash and the curl it runs): end them all.
        if (options.detached) process.kill(-child.pid!, "SIGTERM");
        else child.kill("SIGTERM");
      }
      await exited;
    },
  };
}

/** A sandbox-like organization with an active agent, through the TypeScript client. */
async function orgWithAgent() {
  const org = await svc.newOrg();
  const client = new MandateClient({ base_url: svc.baseUrl, api_key: org.apiKey });
  const principal = await client.createPrincipal({ display_name: "Accounts Payable", kind: "role" });
  const key = await AgentKey.generate();
  const agent = await client.registerAgent({ name: "receiver-demo", principal_id: principal.principal_id, key });
  await client.activate(agent);
  return { org, client, identity: agentIdentity(agent, key) };
}

const WATCHDOG_MS = 60_000;

/** The JSON objects curl printed one after another (its answers end without a newline). */
function jsonValues(text: string): any[] {
  const out: any[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" && depth++ === 0) start = i;
    else if (c === "}" && --depth === 0) out.push(JSON.parse(text.slice(start, i + 1)));
  }
  return out;
}

describe("README, Events: the webhook receivers", () => {
  const receivers = [
    { file: "examples/typescript/webhook-receiver.ts", lang: "ts", command: () => [process.execPath, [path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), path.join(ROOT, "examples/typescript/webhook-receiver.ts")]] as const },
    { file: "examples/python/webhook_receiver.py", lang: "python", command: () => [python, [path.join(ROOT, "examples/python/webhook_receiver.py")]] as const },
  ];

  it("shows each receiver exactly as its file", () => {
    for (const r of receivers) expect(blocks(r.lang), r.file).toContain(readFileSync(path.join(ROOT, r.file), "utf8"));
  });

  it.each(receivers)("$file verifies and logs the events of a real Intent, and refuses a forged delivery", async (r) => {
    const { client, identity } = await orgWithAgent();
    const port = await freePort();
    const hook = await client.createWebhook({ url: `http://127.0.0.1:${port}/`, events: ["DecisionCompleted", "HumanReviewRequested"] });
    const [command, args] = r.command();
    const receiver = startProcess(command, [...args], { PORT: String(port), MANDATE_WEBHOOK_SECRET: hook.secret!, PYTHONDONTWRITEBYTECODE: "1" });
    try {
      await waitFor("the receiver listening", () => receiver.lines.some((l) => l === `listening on http://127.0.0.1:${port}`), { timeoutMs: WATCHDOG_MS });

      // A delivery signed with another secret is refused (400) and never processed.
      const forged = await fetch(`http://127.0.0.1:${port}/`, {
        method: "POST",
        headers: { "content-type": "application/json", "webhook-id": "msg_forged", "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": "v1,bm90IGEgc2lnbmF0dXJl" },
        body: JSON.stringify({ event: "DecisionCompleted", event_id: "evt_forged", occurred_at: new Date().toISOString(), data: { decision_id: "dec_forged" } }),
      });
      expect(forged.status).toBe(400);
      await waitFor("the refusal logged", () => receiver.json().some((l) => l.verified === false), { timeoutMs: WATCHDOG_MS });
      expect(receiver.json().find((l) => l.verified === false)).toEqual({ verified: false, detail: "webhook_signature_invalid" });

      const allow = await client.submitIntent(identity, { action: "reference_noop" });
      const review = await client.submitIntent(identity, { action: "open_account" });
      const logged = await waitFor(
        "both events verified and logged",
        () => {
          const verified = receiver.json().filter((l) => l.verified === true);
          return verified.length >= 2 && verified;
        },
        { timeoutMs: WATCHDOG_MS },
      );
      const byDecision = new Map(logged.map((l) => [l.data.decision_id, l]));
      expect(byDecision.get(allow.decision_id)).toMatchObject({ verified: true, duplicate: false, event: "DecisionCompleted", data: { outcome: "ALLOW", evidence_id: allow.evidence_id } });
      expect(byDecision.get(review.decision_id)).toMatchObject({ verified: true, duplicate: false, event: "HumanReviewRequested", data: { reason: "unrecognized_action" } });
      for (const l of logged) {
        expect(l.webhook_id).toMatch(/^msg_/);
        expect(l.event_id).toMatch(/^evt_/);
        expect(l.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      }
      expect(receiver.json().some((l) => l.data?.decision_id === "dec_forged")).toBe(false);
    } finally {
      await receiver.stop();
    }
  }, 120_000);
});

describe("README, Events: the shell commands", () => {
  const local = (script: string) => script.replaceAll("localhost:8080", `127.0.0.1:${svc.port}`);

  it("subscribes a webhook with curl and lists it", async () => {
    const [subscribe] = blocks("sh");
    expect(subscribe).toContain("/v1alpha/webhooks");
    const { org } = await orgWithAgent();
    const res = await run("bash", ["-euo", "pipefail", "-c", local(subscribe!)], { env: { KEY: org.apiKey }, timeoutMs: 60_000 });
    expect(res.code, res.stderr).toBe(0);
    const [created, listed] = jsonValues(res.stdout);
    expect(created).toMatchObject({ url: "http://127.0.0.1:8000/", events: ["DecisionCompleted", "HumanReviewRequested"], description: "ERP", state: "active" });
    expect(created.secret).toMatch(/^whsec_/);
    expect(listed.webhooks).toEqual([expect.objectContaining({ webhook_id: created.webhook_id })]);
    expect(listed.webhooks[0].secret ?? "").toBe("");
    // Nothing listens on :8000 here; remove the subscription so nothing is retried against it.
    await new MandateClient({ base_url: svc.baseUrl, api_key: org.apiKey }).deleteWebhook(created.webhook_id);
  });

  it("watches the stream with curl -N until its first event", async () => {
    const watch = blocks("sh")[1]!;
    expect(watch).toContain("curl -fsS -N");
    const { org, client, identity } = await orgWithAgent();
    const curl = startProcess("bash", ["-euo", "pipefail", "-c", local(watch)], { KEY: org.apiKey }, { detached: true });
    try {
      await waitFor("the first heartbeat", () => curl.lines.some((l) => l.startsWith(": heartbeat ")), { timeoutMs: WATCHDOG_MS });
      const decision = await client.submitIntent(identity, { action: "reference_noop" });
      await waitFor("the event", () => curl.lines.some((l) => l.startsWith("data: ")), { timeoutMs: WATCHDOG_MS });
      const at = curl.lines.findIndex((l) => l.startsWith("id: "));
      expect(curl.lines[at + 1]).toBe("event: DecisionCompleted");
      const envelope = JSON.parse(curl.lines[at + 2]!.slice("data: ".length));
      expect(curl.lines[at]).toBe(`id: ${envelope.event_id}`);
      expect(envelope).toMatchObject({ event: "DecisionCompleted", data: { decision_id: decision.decision_id, outcome: "ALLOW" } });
    } finally {
      await curl.stop();
    }
  });
});
