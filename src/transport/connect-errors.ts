import { randomUUID } from "node:crypto";
import { ConnectError, Code, createContextKey, createContextValues, type ContextValues } from "@connectrpc/connect";
import { encodeEnvelope, transformSplitEnvelope, type UniversalHandler, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromString, codeToHttpStatus, endStreamFlag, endStreamFromJson, endStreamToJson, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { toConnectError } from "./errors.js";

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of chunks) parts.push(c);
  return Buffer.concat(parts);
}

/**
 * Set by the pipeline's interceptor on every call that reaches it. connect reads, decompresses and
 * decodes a unary call's request before it calls interceptors (they receive the decoded message),
 * so an error on a call that never reached the interceptor arose from reading the client's request.
 */
export const reachedPipelineKey = createContextKey(false, { description: "reached the pipeline" });

/**
 * The code an error connect raised stands for. connect reports a message it cannot decode as
 * INTERNAL; raised before the pipeline, or while a streaming call reads its requests, an INTERNAL
 * can only come from the client's request, so it is INVALID_ARGUMENT.
 */
function codeOf(code: Code, whileReadingRequest: boolean): Code {
  return whileReadingRequest && code === Code.Internal ? Code.InvalidArgument : code;
}

/**
 * A streaming call's requests, with connect's errors in reading them (an undecodable message)
 * reported as the client's input (see codeOf). The pipeline passes this on in place of the stream.
 */
export async function* asClientInput<T>(messages: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    yield* messages;
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Internal) {
      throw new ConnectError(err.rawMessage, codeOf(err.code, true), err.metadata, undefined, err);
    }
    throw err;
  }
}

/** The status trailers of an error that carries no ErrorDetail, with one added; null when nothing needs adding. */
function withDetail(trailer: Headers, requestId: string, values: ContextValues): Headers | null {
  const status = trailer.get("grpc-status");
  if (!status || status === "0" || trailer.has("grpc-status-details-bin")) return null;
  const raw = new ConnectError(decodeURIComponent(trailer.get("grpc-message") ?? ""), codeOf(Number(status) as Code, !values.get(reachedPipelineKey)));
  const detailed = new Headers();
  setTrailerStatus(detailed, toConnectError(raw, requestId));
  return detailed;
}

/**
 * Some errors are raised by connect itself before any interceptor runs (an
 * undecodable message, an oversized one, a broken frame). This wrapper gives
 * them the same shape as every other error: a stable detail code in a
 * mandate.v1.ErrorDetail, and INVALID_ARGUMENT rather than INTERNAL for bad
 * input (recognised by where it arose: see reachedPipelineKey). gRPC trailers,
 * gRPC-Web trailer frames, Connect end-stream messages and Connect unary error
 * bodies are rewritten; answers that already carry a detail pass through untouched.
 */
export function withErrorDetails(handler: UniversalHandler): UniversalHandler {
  const wrapped = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    // connect hands these values to the interceptor, which marks them (reachedPipelineKey).
    const values = (req.contextValues ??= createContextValues());
    const res = await handler(req);
    const requestId = req.header.get("x-request-id") ?? randomUUID();
    const contentType = res.header?.get("content-type") ?? "";
    if (contentType.startsWith("application/grpc") && !contentType.startsWith("application/grpc-web") && res.body && res.trailer) {
      const trailer = res.trailer;
      const body = res.body;
      res.body = (async function* () {
        yield* body;
        const detailed = withDetail(trailer, requestId, values);
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
            const detailed = withDetail(trailerParse(envelope.data), requestId, values);
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
    if (contentType.startsWith("application/connect+") && res.body) {
      // Connect's streaming form carries its status in an end-stream message (flag 2) of JSON at
      // the end of the body; one that is compressed (flag 1) is passed on as it is.
      const body = res.body;
      res.body = (async function* () {
        for await (const envelope of transformSplitEnvelope(Number.MAX_SAFE_INTEGER)(body)) {
          if (envelope.flags === endStreamFlag) {
            const end = endStreamFromJson(envelope.data);
            if (end.error && end.error.details.length === 0) {
              const raw = new ConnectError(end.error.rawMessage, codeOf(end.error.code, !values.get(reachedPipelineKey)));
              const json = endStreamToJson(end.metadata, toConnectError(raw, requestId), {});
              yield encodeEnvelope(endStreamFlag, new TextEncoder().encode(JSON.stringify(json)));
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
        const raw = new ConnectError(json.message ?? "", codeOf(codeFromString(json.code ?? "") ?? Code.Unknown, !values.get(reachedPipelineKey)));
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
