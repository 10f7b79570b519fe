// Regenerates the fixture's derived files after authority-cases.json or the compiler changes:
//   npx tsx test/policy-fixtures/generate.ts
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FIXTURE_DIR, generatedFiles, loadAuthorityFixture } from "./fixture.js";

rmSync(join(FIXTURE_DIR, "policies"), { recursive: true, force: true });
mkdirSync(join(FIXTURE_DIR, "policies"));
for (const [path, content] of generatedFiles(loadAuthorityFixture())) {
  writeFileSync(join(FIXTURE_DIR, path), content);
  console.log(`wrote test/policy-fixtures/${path}`);
}
