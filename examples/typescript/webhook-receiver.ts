// A webhook receiver: verifies each delivery's Standard Webhooks signature, drops duplicates by
// webhook-id (delivery is at least once), logs the event and acknowledges with a 2xx.
//   MANDATE_WEBHOOK_SECRET=whsec_… PORT=8000 npx tsx examples/typescript/webhook-receiver.ts
import http from "node:http";
import { verifyWebhook, WebhookVerificationError } from "@mandate/client";

const secret = process.env.MANDATE_WEBHOOK_SECRET!; // from POST /v1alpha/webhooks (shown once)
const seen = new Set<string>(); // a real receiver keeps these in its database

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    try {
      // The raw body as received: re-serialised JSON would not verify.
      const event = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
      const id = String(req.headers["webhook-id"]);
      const duplicate = seen.has(id);
      seen.add(id);
      console.log(JSON.stringify({ verified: true, duplicate, webhook_id: id, ...event }));
      res.writeHead(204).end();
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      console.log(JSON.stringify({ verified: false, detail: err.detail }));
      res.writeHead(400).end(); // not retried as a success; never process it
    }
  });
});
server.listen(Number(process.env.PORT ?? 8000), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}`);
});
