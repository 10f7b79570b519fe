import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorDetailSchema } from "../gen/mandate/v1/errors_pb.js";
import { ReconciliationService } from "../gen/mandate/v1alpha/execution_pb.js";
import { ReconciliationStatus } from "../gen/mandate/v1/decisions_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CliError, EXIT_OK, parseCommandLine, serviceUrl, type CliCommand } from "./command.js";

const usage = `usage: mandate reconcile [--url URL] [--organization ORG_ID] DECISION_ID

Computes and records the (early access) reconciliation of a decision's execution
receipts against what was authorized, through the platform-internal gRPC service.
The operator key comes from MANDATE_OPERATOR_KEY; --url defaults to MANDATE_BASE_URL,
else http://127.0.0.1:8080; --organization to MANDATE_ORGANIZATION_ID.`;

/** `mandate reconcile DECISION_ID`: the only way to trigger a reconciliation (there is no public endpoint). */
export const reconcileCommand: CliCommand = {
  name: "reconcile",
  usage,
  async run(args, io) {
    const { values, positionals } = parseCommandLine(args, { url: { type: "string" }, organization: { type: "string" } });
    const decisionId = positionals[0];
    if (!decisionId || positionals.length > 1) throw new CliError("exactly one DECISION_ID is required", true);
    const operatorKey = process.env.MANDATE_OPERATOR_KEY;
    const organization = values.organization ?? process.env.MANDATE_ORGANIZATION_ID;
    if (!operatorKey) throw new CliError("MANDATE_OPERATOR_KEY is not set");
    if (!organization) throw new CliError("--organization (or MANDATE_ORGANIZATION_ID) is required", true);
    const client = createClient(
      ReconciliationService,
      createGrpcTransport({ baseUrl: serviceUrl(values.url) }),
    );
    try {
      const r = await client.reconcile(
        { decisionId },
        { headers: { "x-service-operator-key": operatorKey, "x-service-organization-id": organization } },
      );
      io.out(
        JSON.stringify({
          decision_id: decisionId,
          status: ReconciliationStatus[r.status].replace("RECONCILIATION_STATUS_", ""),
          receipt_id: r.receiptId,
          reported_by: r.reportedBy,
          reconciled_at: r.reconciledAt ? timestampDate(r.reconciledAt).toISOString() : null,
        }),
      );
      return EXIT_OK;
    } catch (err) {
      const e = ConnectError.from(err);
      const detail = e.findDetails(ErrorDetailSchema)[0];
      throw new CliError(`${detail?.detail ?? e.code}: ${detail?.message ?? e.rawMessage}`);
    }
  },
};
