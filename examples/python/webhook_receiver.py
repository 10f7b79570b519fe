"""A webhook receiver: verifies each delivery's Standard Webhooks signature, drops duplicates by
webhook-id (delivery is at least once), logs the event and acknowledges with a 2xx.
    MANDATE_WEBHOOK_SECRET=whsec_... PORT=8000 python examples/python/webhook_receiver.py
"""

import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from mandate_client import WebhookVerificationError, verify_webhook

SECRET = os.environ["MANDATE_WEBHOOK_SECRET"]  # from POST /v1alpha/webhooks (shown once)
seen = set()  # a real receiver keeps these in its database


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        # The raw body as received: re-serialised JSON would not verify.
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            event = verify_webhook(body, self.headers, SECRET)
        except WebhookVerificationError as err:
            print(json.dumps({"verified": False, "detail": err.detail}), flush=True)
            self.send_response(400)  # never process it
        else:
            webhook_id = self.headers["webhook-id"]
            duplicate = webhook_id in seen
            seen.add(webhook_id)
            print(json.dumps({"verified": True, "duplicate": duplicate, "webhook_id": webhook_id, **event.raw}), flush=True)
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Receiver)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
