import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { pythonVenv, ROOT, run, type Ran } from "./clients-python-env.js";

/*
 * The README's "Human review" section runs: examples/typescript/human-review.ts and
 * examples/python/human_review.py against a live service, each reaching the same states:
 * a dual-approval review still PENDING after one approval, the same key refused a second
 * time, RESOLVED approved after a second reviewer (the outcome still HUMAN_REVIEW), a
 * from-review Capability consumed, and a rejected review that gets no Capability.
 */

let svc: TestService;
let python: string;

beforeAll(async () => {
  [svc, python] = await Promise.all([startService(), pythonVenv()]);
}, 300_000);
afterAll(() => svc?.close());

function check(res: Ran): void {
  const output = `${res.stdout}\n${res.stderr}`;
  expect(res.code, output).toBe(0);
  expect(JSON.parse(res.stdout.trim().split("\n").at(-1)!)).toEqual({
    pending: { outcome: "HUMAN_REVIEW", reason: "requires_dual_approval", status: "PENDING" },
    after_first: { status: "PENDING", approvals: 1 },
    same_key_refused: "permission_denied",
    resolved: { outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: "approved", approvals: 2 },
    capability_consumed: true,
    rejected: { status: "RESOLVED", resolution: "rejected" },
    from_rejected: "review_not_approved",
  });
}

describe("human review examples (README, Human review)", () => {
  it("examples/typescript/human-review.ts", async () => {
    check(await run(process.execPath, [path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), path.join(ROOT, "examples/typescript/human-review.ts")], { env: { MANDATE_BASE_URL: svc.baseUrl }, timeoutMs: 90_000 }));
  }, 120_000);

  it("examples/python/human_review.py", async () => {
    check(await run(python, [path.join(ROOT, "examples/python/human_review.py")], { env: { MANDATE_BASE_URL: svc.baseUrl, PYTHONDONTWRITEBYTECODE: "1" }, timeoutMs: 90_000 }));
  }, 120_000);
});

it("the README's Human review lines are the examples' own", () => {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Human review"), readme.indexOf("## Clients"));
  for (const [lang, file, comment] of [["ts", "examples/typescript/human-review.ts", "//"], ["python", "examples/python/human_review.py", "#"]] as const) {
    const block = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(section);
    expect(block, lang).not.toBeNull();
    const example = readFileSync(path.join(ROOT, file), "utf8");
    const lines = block![1]!.trim().split("\n");
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const line of lines) {
      const code = line.split(`  ${comment} `)[0]!.trim();
      expect(example, `${file} holds: ${code}`).toContain(code);
    }
  }
});
