import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { createContextValues, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { clientAddressKey } from "./context.js";
import type { RequestPipeline } from "./pipeline.js";
import { createReflectionService } from "./reflection.js";
import { createTranscoder, type RegisteredService } from "./transcoder.js";

/** A plain route outside the API (e.g. the JWKS), answered with JSON. */
export type PlainRoute = () => Promise<unknown>;

/** The listening server and how to stop it. */
export interface RunningServer {
  port: number;
  close(): Promise<void>;
}

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n");

/**
 * Serves gRPC (h2c), gRPC-Web, Connect and /v1 JSON on one port. Node's h2c
 * server cannot answer HTTP/1.1, so each connection's first bytes decide:
 * the HTTP/2 preface goes to the HTTP/2 server, anything else to HTTP/1.1.
 * Both share one request handler.
 */
export async function listen(options: {
  host: string;
  port: number;
  services: readonly RegisteredService[];
  pipeline: RequestPipeline;
  bodyLimit: number;
  plainRoutes: Record<string, PlainRoute>;
}): Promise<RunningServer> {
  const { services, pipeline } = options;
  const transcoder = createTranscoder(services, pipeline, options.bodyLimit);
  const descs: DescService[] = services.map((s) => s.service);
  const handler = connectNodeAdapter({
    routes: (router: ConnectRouter) => {
      for (const { service, impl } of services) router.service(service, impl as never);
      router.service(ServerReflection, createReflectionService([...descs, ServerReflection]));
    },
    interceptors: [pipeline.interceptor()],
    readMaxBytes: options.bodyLimit,
    contextValues: (req) => createContextValues().set(clientAddressKey, req.socket.remoteAddress ?? ""),
    fallback: (req, res) => {
      const path = (req.url ?? "/").split("?")[0]!;
      const plain = options.plainRoutes[path];
      if (plain && req.method === "GET") {
        plain().then(
          (body) => {
            res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=60" });
            res.end(JSON.stringify(body));
          },
          (err) => {
            pipeline.logger.error({ err }, "plain route failed");
            res.writeHead(503, { "content-type": "application/json" });
            res.end(JSON.stringify({ detail: "unavailable", message: "Temporarily unavailable.", request_id: pipeline.requestId(undefined) }));
          },
        );
        return;
      }
      void transcoder(req, res);
    },
  });

  const h1 = http.createServer(handler);
  h1.keepAliveTimeout = 65_000;
  const h2 = http2.createServer({}, handler);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.once("readable", () => {
      const head: Buffer | null = socket.read(HTTP2_PREFACE.length) ?? socket.read();
      if (head === null) {
        socket.destroy();
        return;
      }
      socket.unshift(head);
      (head.equals(HTTP2_PREFACE.subarray(0, head.length)) ? h2 : h1).emit("connection", socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
