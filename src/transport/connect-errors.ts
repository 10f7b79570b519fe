import { randomUUID } from "node:crypto";
import { ConnectError, Code } from "@connectrpc/connect";
import { encodeEnvelope, transformSplitEnvelope, type UniversalHandler, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromString, codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { toConnectError } from "./errors.js";

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return Buffer.concat(parts);
}

/** The status trailers of an error that carries no ErrorDetail, with one added; null when nothing needs adding. */
function withDetail(trailer: Headers, requestId: string): Headers | null {
  const status = trailer.get("grpc-status");
  if (!status || status === "0" || trailer.has("grpc-status-details-bin")) return null;
  const raw = new ConnectError(decodeURIComponent(trailer.get("grpc-message") ?? ""), Number(status) as Code);
  const detailed = new Headers();
  setTrailerStatus(detailed, toConnectError(raw, requestId));
  return detailed;
}

/**
 * Some errors are raised by connect itself before any interceptor runs (an
 * undecodable message, an oversized one, a broken frame). This wrapper gives
 * them the same shape as every other error: a stable detail code in a
 * mandate.v1.ErrorDetail, and INVALID_ARGUMENT rather than INTERNAL for bad
 * input. gRPC trailers, gRPC-Web trailer frames and Connect unary error bodies are rewritten; answers
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
        const detailed = withDetail(trailer, requestId);
        if (detailed) {
          trailer.delete("grpc-message");
          detailed.forEach((value, key) => trailer.set(key, value));
        }
      })();
      return res;
    }
    if (contentType.startsWith("application/grpc-web") && res.body) {
      // gRPC-Web carries its status in a trailer frame at the end of the body.
      const body = res.body;
      res.body = (async function* () {
        for await (const envelope of transformSplitEnvelope(Number.MAX_SAFE_INTEGER)(body)) {
          if ((envelope.flags & trailerFlag) === trailerFlag) {
            const detailed = withDetail(trailerParse(envelope.data), requestId);
            if (detailed) {
              yield encodeEnvelope(trailerFlag, trailerSerialize(detailed));
              continue;
            }
          }
          yield encodeEnvelope(envelope.flags, envelope.data);
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
