import { afterAll, beforeAll, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { startService, type TestService } from "../support/service.js";
import { SandboxService, OrganizationService } from "../../src/gen/mandate/v1/organizations_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
let svc: TestService;
beforeAll(async () => { svc = await startService(); });
afterAll(async () => { await svc?.close(); });
it("smoke", async () => {
  const r = await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: "a@b.co" } });
  console.log(r.status, r.body);
  const org = await svc.newOrg();
  console.log(org);
  console.log((await svc.v1("GET", "/v1/organization", { bearer: org.apiKey })).body);
  console.log((await svc.v1("POST", "/v1/organization/api-keys", { bearer: org.apiKey, body: {name: "x", permissions: ["ORG_ADMIN"]} })).body);
  console.log((await svc.v1("GET", "/v1/organization/api-keys", { bearer: org.apiKey })).body);
  console.log(await svc.grpc(SandboxService).createSandboxOrganization({ email: "x@y.co" }));
  try { await svc.grpc(OrganizationService).getOrganization({}); } catch (e) { const c = ConnectError.from(e); console.log(c.code, c.findDetails(ErrorDetailSchema)); }
  try { await svc.connect(OrganizationService).getOrganization({}); } catch (e) { const c = ConnectError.from(e); console.log(c.code, c.findDetails(ErrorDetailSchema)); }
  expect(1).toBe(1);
});
