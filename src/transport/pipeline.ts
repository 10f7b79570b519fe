import { randomUUID } from "node:crypto";
import { create, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { createContextValues, type ContextValues, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { Caller } from "../base/caller.js";
import type { Credentials } from "../domain/credentials.js";
import { MandateError } from "../base/errors.js";
import { requireStorableText } from "../base/text.js";
import { accessOf } from "./access.js";
import { authenticate, type HeaderSource } from "./authenticate.js";
import type { ClientAddressOf } from "./client-address.js";
import { callerKey, clientAddressKey, rawJsonBodyKey, requestIdKey } from "../services/context.js";
import { asClientInput, reachedPipelineKey } from "./connect-errors.js";
import { describeError, toConnectError } from "./errors.js";
import { Metrics } from "./metrics.js";

const NEVER_ABORTED = new AbortController().signal;

/** Which of the three connect protocols a request speaks, for logs. */
export function protocolOf(contentType: string | null | undefined): string {
  if (contentType?.startsWith("application/grpc-web")) return "grpc-web";
  if (contentType?.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** What {@link RequestPipeline.invoke} tells a method's implementation about its call. */
interface Invocation {
  protocolName: string;
  requestMethod: string;
  url: string;
  headers: () => Headers;
  /** The `/v1` JSON body when it is the whole message (see rawJsonBodyKey). */
  jsonBody?: Uint8Array;
  /** Aborted when the client goes away (long-lived calls: a server stream served as Server-Sent Events). */
  signal?: AbortSignal;
}

/**
 * The HandlerContext of a call made outside connect: what connect's createHandlerContext
 * builds, without the deadline timer and linked abort signals these requests never use (they
 * cost more than the rest of the routing). The header objects are made only if the
 * implementation reads them (none does on the hot paths).
 *
 * A class, with the lazy headers as prototype getters, and not an object literal with getters
 * of its own: such a literal gets a map of its own, and maps live in the old generation, so the
 * getters (and through them the whole request) would survive every young collection until the
 * next full one.
 */
class InvocationContext implements HandlerContext {
  readonly service: DescService;
  readonly method: HandlerContext["method"];
  readonly protocolName: string;
  readonly requestMethod: string;
  readonly url: string;
  readonly signal: AbortSignal;
  private readonly headers: () => Headers;
  private requestHeaders: Headers | undefined;
  private responseHeaders: Headers | undefined;
  private responseTrailers: Headers | undefined;

  constructor(
    call: { service: DescService; method: DescMethod },
    request: Invocation,
    readonly values: ContextValues,
  ) {
    this.service = call.service;
    this.method = call.method as HandlerContext["method"];
    this.protocolName = request.protocolName;
    this.requestMethod = request.requestMethod;
    this.url = request.url;
    this.headers = request.headers;
    this.signal = request.signal ?? NEVER_ABORTED;
  }

  get requestHeader(): Headers {
    return (this.requestHeaders ??= this.headers());
  }

  get responseHeader(): Headers {
    return (this.responseHeaders ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.responseTrailers ??= new Headers());
  }

  timeoutMs(): number | undefined {
    return undefined;
  }
}

/**
 * What every request goes through before its handler, on either transport:
 * a request id, authentication against the method's access rule, and logging.
 */
export class RequestPipeline {
  constructor(
    private readonly credentials: Credentials,
    readonly logger: Logger,
    readonly metrics: Metrics = new Metrics(),
    private readonly clientAddressOf: ClientAddressOf = (peer) => peer,
  ) {}

  /** The client's request id when it is sane, else a new one. */
  requestId(presented: string | string[] | undefined | null): string {
    return typeof presented === "string" && /^[A-Za-z0-9._-]{1,64}$/.test(presented) ? presented : randomUUID();
  }

  /**
   * Authenticates a call of `Service.Method` from socket peer `peer`; unknown methods are
   * refused, never let through. The caller's client address is the peer, or behind trusted
   * proxies the address they forwarded for.
   */
  authenticate(serviceTypeName: string, methodName: string, headers: HeaderSource, peer: string): Promise<Caller> {
    const access = accessOf(serviceTypeName, methodName);
    if (!access) throw new MandateError("not_found", "Unknown method.");
    return authenticate(this.credentials, access, headers, this.clientAddressOf(peer, headers.get("x-forwarded-for")));
  }

  /**
   * Calls a method's implementation outside connect, as the /v1 layer and the unary gRPC fast
   * path do, for a caller already authenticated: refuses unstorable text, then passes an
   * {@link InvocationContext}.
   */
  async invoke(
    call: { service: DescService; method: DescMethod; impl: Record<string, (req: Message, ctx: HandlerContext) => unknown> },
    message: Message,
    caller: Caller,
    request: Invocation & { requestId: string },
  ): Promise<Message> {
    requireStorableText(message);
    const values = createContextValues().set(callerKey, caller).set(requestIdKey, request.requestId);
    if (request.jsonBody) values.set(rawJsonBodyKey, request.jsonBody);
    const ctx = new InvocationContext(call, request, values);
    const result = await call.impl[call.method.localName]!.call(call.impl, message, ctx);
    return create(call.method.output, result as Record<string, unknown>);
  }

  /**
   * Calls a server-streaming method's implementation outside connect (Server-Sent Events), as
   * `invoke` does a unary one: the messages it yields, as they come. The stream ends when the
   * implementation returns or `request.signal` aborts; its errors are thrown from the iteration.
   */
  invokeStream(
    call: { service: DescService; method: DescMethod; impl: Record<string, (req: Message, ctx: HandlerContext) => unknown> },
    message: Message,
    caller: Caller,
    request: Invocation & { requestId: string; signal: AbortSignal },
  ): AsyncGenerator<Message> {
    requireStorableText(message);
    const values = createContextValues().set(callerKey, caller).set(requestIdKey, request.requestId);
    const ctx = new InvocationContext(call, request, values);
    const output = call.method.output;
    const messages = call.impl[call.method.localName]!.call(call.impl, message, ctx) as AsyncIterable<Record<string, unknown>>;
    return (async function* () {
      for await (const m of messages) yield create(output, m);
    })();
  }

  /**
   * Logs (at info) and counts a request whose client went away before its body ended, under the
   * outcome `client_closed`: no answer reached anyone, and it is no server error.
   */
  requestClosed(protocol: string, rpc: string, requestId: string, started: number): void {
    const ms = performance.now() - started;
    this.metrics.observe(protocol, rpc, "client_closed", ms);
    this.logger.info({ request_id: requestId, protocol, rpc, detail: "client_closed", ms: Math.round(ms * 100) / 100 }, "request");
  }

  /** `messages`, with what they throw converted as the interceptor converts a unary call's error. */
  private async *convertingErrors<T>(messages: AsyncIterable<T>, requestId: string): AsyncGenerator<T> {
    try {
      yield* messages;
    } catch (err) {
      const described = describeError(err);
      // A shutdown or an unreachable database ends streams (503, resumed by clients): not a failure to log.
      if (described.code === "internal") this.logger.error({ err, request_id: requestId }, "stream failed");
      throw toConnectError(err, requestId);
    }
  }

  /** The connect interceptor: same authentication, errors converted to ConnectErrors with an ErrorDetail. */
  interceptor(): Interceptor {
    return (next) => async (req) => {
      const started = performance.now();
      const requestId = this.requestId(req.header.get("x-request-id"));
      req.contextValues.set(requestIdKey, requestId);
      req.contextValues.set(reachedPipelineKey, true);
      let code = "ok";
      try {
        const clientAddress = req.contextValues.get(clientAddressKey);
        req.contextValues.set(callerKey, await this.authenticate(req.service.typeName, req.method.name, req.header, clientAddress));
        if (!req.stream) requireStorableText(req.message);
        const res = await next(req.stream ? { ...req, message: asClientInput(req.message) } : req);
        res.header.set("x-request-id", requestId);
        // A server stream fails after its call has returned, while its messages are read: its
        // errors get the same conversion here, where they are thrown.
        if (res.stream) return { ...res, message: this.convertingErrors(res.message, requestId) };
        return res;
      } catch (err) {
        const described = describeError(err);
        code = described.code;
        if (described.status >= 500) this.logger.error({ err, request_id: requestId }, "request failed");
        throw toConnectError(err, requestId);
      } finally {
        if (!req.stream) {
          this.metrics.observe(protocolOf(req.header.get("content-type")), `${req.service.name}.${req.method.name}`, code, performance.now() - started);
          this.logger.info(
            { request_id: requestId, protocol: protocolOf(req.header.get("content-type")), rpc: `${req.service.name}.${req.method.name}`, detail: code, ms: Math.round((performance.now() - started) * 100) / 100 },
            "request",
          );
        }
      }
    };
  }
}
