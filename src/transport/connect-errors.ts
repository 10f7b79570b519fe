import { randomUUID } from "node:crypto";
import { ConnectError, Code } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromString, codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { toConnectError } from "./errors.js";

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return Buffer.concat(parts);
}

/**
 * Some errors are raised by connect itself before any interceptor runs (an
 * undecodable message, an oversized one, a broken frame). This wrapper gives
 * them the same shape as every other error: a stable detail code in a
 * mandate.v1.ErrorDetail, and INVALID_ARGUMENT rather than INTERNAL for bad
 * input. gRPC trailers and Connect unary error bodies are rewritten; answers
 * that already carry a detail pass through untouched.
 */
export function withErrorDetails(handler: UniversalHandler): UniversalHandler {
  const wrapped = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    const requestId = req.header.get("x-request-id") ?? randomUUID();
    const contentType = res.header?.get("content-type") ?? "";
    if (contentType.startsWith("application/grpc") && !contentType.startsWith("application/grpc-web") && res.body && res.trailer) {
      const trailer = res.trailer;
      const body = res.body;
      res.body = (async function* () {
        yield* body;
        const status = trailer.get("grpc-status");
        if (status && status !== "0" && !trailer.has("grpc-status-details-bin")) {
          const raw = new ConnectError(decodeURIComponent(trailer.get("grpc-message") ?? ""), Number(status) as Code);
          trailer.delete("grpc-message");
          setTrailerStatus(trailer, toConnectError(raw, requestId));
        }
      })();
      return res;
    }
    if (res.status >= 400 && contentType.startsWith("application/json") && res.body) {
      const body = res.body;
      res.body = (async function* () {
        const bytes = await readAll(body);
        let json: { code?: string; message?: string; details?: unknown[] } = {};
        try {
          json = JSON.parse(Buffer.from(bytes).toString("utf8")) as typeof json;
        } catch {
          // Not an error document: pass it on unchanged.
          yield bytes;
          return;
        }
        if (json.details?.length) {
          yield bytes;
          return;
        }
        const raw = new ConnectError(json.message ?? "", codeFromString(json.code ?? "") ?? Code.Unknown);
        const err = toConnectError(raw, requestId);
        res.status = codeToHttpStatus(err.code);
        res.header?.delete("content-length");
        yield errorToJsonBytes(err, {});
      })();
    }
    return res;
  };
  return Object.assign(wrapped, {
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    protocolNames: handler.protocolNames,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}
