// Shared by the service benchmarks (bench/intents.ts, bench/capabilities.ts): the service as a
// child process against a Postgres and Redis the bench starts, a keep-alive HTTP/1.1 client, an
// open- and a closed-loop load generator, and the figures they print. Asserts nothing.
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startEmbeddedPostgres } from "../src/storage/postgres/embedded.js";
import { serviceNodeFlags } from "../test/support/process.js";

/** The repository root (the service is started from here). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** One line saying how busy the machine was, since the figures are only as quiet as it. */
export function machineLine(): string {
  return `Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`;
}

/**
 * CPU cost of one keep-alive HTTP/1.1 round trip (client and server in this process, tiny JSON
 * bodies), in µs: a yardstick for how fast this machine is right now, printed beside the figures.
 */
export async function calibrate(): Promise<number> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.end('{"ok":true}'));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { port } = server.address() as net.AddressInfo;
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request({ agent, host: "127.0.0.1", port, method: "POST", path: "/" }, (res) => {
        res.resume();
        res.on("end", resolve);
      });
      req.on("error", reject);
      req.end('{"hello":"world"}');
    });
  try {
    for (let i = 0; i < 1500; i++) await once();
    const before = process.cpuUsage();
    for (let i = 0; i < 2000; i++) await once();
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 2000;
  } finally {
    agent.destroy();
    server.close();
  }
}

/** A free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * CPU time, in seconds, of the machine's `postgres` processes so far (the bench's database is
 * the only one running): its share of a run is the difference of two readings.
 */
export function postgresCpuSeconds(): number {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    const close = stat.lastIndexOf(") ");
    if (!stat.slice(stat.indexOf("(") + 1, close).startsWith("postgres")) continue;
    // After "(comm) ": utime and stime are the 12th and 13th fields, in clock ticks (USER_HZ 100).
    const fields = stat.slice(close + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / 100;
}

/** Something the bench started and must stop. */
export interface Stoppable {
  stop(): Promise<void>;
}

/** A throwaway embedded Postgres (default settings: synchronous_commit on, fsync on). */
export async function startBenchPostgres(): Promise<Stoppable & { url: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), "mandate-bench-pg-"));
  // Postgres runs as the `postgres` user when we are root; it must reach its data folder.
  await chmod(dir, 0o777);
  const pg = await startEmbeddedPostgres(dir);
  return {
    url: pg.url,
    async stop() {
      await pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function waitForExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

/** A throwaway redis-server without persistence. */
export async function startBenchRedis(): Promise<Stoppable & { url: string }> {
  const port = await freePort();
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("error", (err) => (clearTimeout(timer), reject(err)));
    child.once("exit", (code) => (clearTimeout(timer), reject(new Error(`redis-server exited (${code}):\n${output}`))));
  });
  child.stdout!.resume();
  child.stderr!.resume();
  child.removeAllListeners("exit");
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      child.kill("SIGTERM");
      await waitForExit(child);
    },
  };
}

/** The service running as its own process (`node <serviceNodeFlags> --import tsx src/main.ts`: the flags `npm start` passes; see the README). */
export interface ServiceChild extends Stoppable {
  baseUrl: string;
  port: number;
  pid: number;
  operatorKey: string;
  /** Peak resident set size so far (VmHWM), in MiB. */
  peakRssMiB(): number;
  /** CPU time of the process (all threads) so far, in seconds. */
  cpuTimes(): { user: number; system: number };
}

/** Starts the service with LOG_LEVEL=warn against `databaseUrl` (and Redis when given); resolves once it answers. */
export async function spawnMandate(databaseUrl: string, redisUrl?: string): Promise<ServiceChild> {
  const port = await freePort();
  const operatorKey = `op_${randomBytes(24).toString("base64url")}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), "mandate-bench-data-"));
  const env: Record<string, string> = {
    PORT: String(port),
    HOST: "127.0.0.1",
    DATABASE_URL: databaseUrl,
    MANDATE_OPERATOR_KEY: operatorKey,
    MANDATE_DATA_DIR: dataDir,
    LOG_LEVEL: "warn",
    ...(redisUrl && { REDIS_URL: redisUrl }),
  };
  for (const k of ["PATH", "HOME", "TMPDIR", "LANG"]) if (process.env[k] !== undefined) env[k] = process.env[k]!;
  // BENCH_NODE_ARGS adds node flags to the service, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...serviceNodeFlags, ...nodeArgs, "--import", "tsx", "src/main.ts"], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the service exited before answering:\n${output.join("")}`);
    const ok = await new Promise<boolean>((resolve) => {
      const req = http.get(`${baseUrl}/.well-known/jwks.json`, { agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
      req.on("error", () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the service did not answer within 90 s:\n${output.join("")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const pid = child.pid!;
  const status = () => readFileSync(`/proc/${pid}/status`, "utf8");
  return {
    baseUrl,
    port,
    pid,
    operatorKey,
    peakRssMiB: () => Number(/VmHWM:\s+(\d+) kB/.exec(status())?.[1] ?? NaN) / 1024,
    cpuTimes() {
      // Fields after "(comm) ": utime and stime are the 12th and 13th, in clock ticks (USER_HZ 100).
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
    },
    async stop() {
      child.kill("SIGTERM");
      await waitForExit(child);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** An answer: status and raw body. */
export interface Answer {
  status: number;
  text: string;
}

/** One keep-alive connection of {@link HttpClient}, with at most one request in flight. */
class HttpConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private pending: { resolve(a: Answer): void; reject(e: Error): void } | null = null;
  broken = false;

  constructor(readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    const fail = (err: Error) => {
      this.broken = true;
      this.pending?.reject(err);
      this.pending = null;
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("connection closed")));
  }

  send(request: Buffer): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(request);
    });
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const headEnd = this.buffer.indexOf("\r\n\r\n");
    if (headEnd < 0 || !this.pending) return;
    const head = this.buffer.toString("latin1", 0, headEnd);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!length) {
      this.pending.reject(new Error(`the bench client needs Content-Length: ${head.slice(0, 200)}`));
      this.pending = null;
      return;
    }
    const end = headEnd + 4 + Number(length[1]);
    if (this.buffer.length < end) return;
    const answer = { status: Number(head.slice(9, 12)), text: this.buffer.toString("utf8", headEnd + 4, end) };
    this.buffer = this.buffer.subarray(end);
    const { resolve } = this.pending;
    this.pending = null;
    resolve(answer);
  }
}

/**
 * A keep-alive HTTP/1.1 client of one service (what an enforcement point or agent SDK would
 * hold), as lean as the protocol allows: each request is written as one buffer, and answers are
 * parsed for status and Content-Length only. On a shared 2-core machine the generator's CPU is
 * taken from the service (node:http's client costs ~4x as much here).
 */
export class HttpClient {
  private readonly idle: HttpConnection[] = [];
  private readonly queue: ((c: HttpConnection) => void)[] = [];
  private readonly all = new Set<HttpConnection>();
  private readonly url: URL;

  constructor(
    baseUrl: string,
    private readonly maxSockets = 128,
  ) {
    this.url = new URL(baseUrl);
  }

  async request(method: string, path: string, body?: Buffer | string | object, headers: Record<string, string> = {}): Promise<Answer> {
    const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
    let head = `${method} ${path} HTTP/1.1\r\nhost: ${this.url.host}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    if (payload) head += `${"content-type" in headers ? "" : "content-type: application/json\r\n"}content-length: ${payload.length}\r\n`;
    const request = Buffer.concat([Buffer.from(`${head}\r\n`, "latin1"), ...(payload ? [payload] : [])]);
    const conn = await this.acquire();
    try {
      return await conn.send(request);
    } finally {
      this.release(conn);
    }
  }

  /** A JSON call that must answer 200; returns the parsed body. */
  async json<T = any>(method: string, path: string, body: object | undefined, bearer?: string, headers: Record<string, string> = {}): Promise<T> {
    const res = await this.request(method, path, body, bearer ? { ...headers, authorization: `Bearer ${bearer}` } : headers);
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return JSON.parse(res.text) as T;
  }

  close(): void {
    for (const c of this.all) c.socket.destroy();
  }

  private acquire(): Promise<HttpConnection> {
    const idle = this.idle.pop();
    if (idle) return Promise.resolve(idle);
    if (this.all.size < this.maxSockets) {
      return new Promise((resolve, reject) => {
        const socket = net.connect(Number(this.url.port), this.url.hostname);
        const conn = new HttpConnection(socket);
        this.all.add(conn);
        socket.once("connect", () => resolve(conn));
        socket.once("error", reject);
      });
    }
    return new Promise((resolve) => this.queue.push(resolve));
  }

  private release(conn: HttpConnection): void {
    if (conn.broken) {
      this.all.delete(conn);
      conn.socket.destroy();
      const waiting = this.queue.shift();
      if (waiting) void this.acquire().then(waiting);
      return;
    }
    const next = this.queue.shift();
    if (next) next(conn);
    else this.idle.push(conn);
  }
}

/** HTTP/2 frame types and flags this client handles (RFC 9113 §6). */
const H2 = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, END_STREAM: 0x1, ACK: 0x1, PADDED: 0x8, PRIORITY: 0x20 };
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** The receive window this client opens for the connection, topped up when half is used. */
const H2_RECEIVE_WINDOW = 1 << 30;

function h2Frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.allocUnsafe(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `prefixBits`-bit prefix whose high bits are `first` (RFC 7541 §5.1). */
function hpackInt(first: number, prefixBits: number, value: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  for (value -= max; value >= 128; value >>>= 7) out.push((value & 127) | 128);
  out.push(value);
  return out;
}

/** A literal header field without indexing, by static-table name index or a new name, no Huffman (RFC 7541 §6.2.2). */
function hpackLiteral(name: string | number, value: string): Buffer {
  const v = Buffer.from(value, "latin1");
  const head = typeof name === "number" ? hpackInt(0, 4, name) : [0, ...hpackInt(0, 7, name.length), ...Buffer.from(name, "latin1")];
  return Buffer.from([...head, ...hpackInt(0, 7, v.length), ...v]);
}

interface GrpcCall {
  chunks: Buffer[];
  resolve(r: { status: number; message: string; body: Buffer }): void;
  reject(e: Error): void;
}

/**
 * A lean gRPC unary client: one HTTP/2 connection (h2c) framed by hand, as HttpConnection frames
 * HTTP/1.1. On a shared 2-core machine the generator's CPU is taken from the service, and
 * node:http2's client streams cost about twice an HTTP/1.1 call here (~300 against ~170 µs per
 * call at 1,000/s); this one writes each call as one buffer and reads frames off the socket.
 * It never decodes the response headers (that needs HPACK's Huffman code and dynamic table):
 * a call succeeds when its stream ends carrying a response message, since a gRPC error ends
 * the stream with trailers only. Requests are small (one frame each); flow control is honoured
 * for the connection.
 */
export class RawGrpcClient {
  private readonly socket: net.Socket;
  private buffer: Buffer = Buffer.alloc(0);
  private readonly calls = new Map<number, GrpcCall>();
  private nextStreamId = 1;
  /** What the server lets us send on the connection (RFC 9113 §6.9), and calls waiting for it. */
  private sendWindow = 65_535;
  private readonly blocked: { bytes: Buffer; size: number }[] = [];
  private received = 0;
  /** Header fields every call sends: pseudo-headers first (RFC 9113 §8.3), so :path goes between the two. */
  private readonly pseudoHeaders: Buffer;
  private readonly fixedHeaders: Buffer;
  private failure: Error | null = null;

  constructor(baseUrl: string) {
    const { hostname, port, host } = new URL(baseUrl);
    this.socket = net.connect({ host: hostname, port: Number(port), noDelay: true });
    // :method POST and :scheme http are static-table entries 3 and 6; :authority is name 1, content-type name 31.
    this.pseudoHeaders = Buffer.concat([Buffer.from([0x83, 0x86]), hpackLiteral(1, host)]);
    this.fixedHeaders = Buffer.concat([hpackLiteral(31, "application/grpc+proto"), hpackLiteral("te", "trailers")]);
    const windowUpdate = Buffer.allocUnsafe(4);
    windowUpdate.writeUInt32BE(H2_RECEIVE_WINDOW - 65_535);
    this.socket.write(Buffer.concat([H2_PREFACE, h2Frame(H2.SETTINGS, 0, 0, Buffer.alloc(0)), h2Frame(H2.WINDOW_UPDATE, 0, 0, windowUpdate)]));
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    const fail = (err: Error) => this.fail(err);
    this.socket.on("error", fail);
    this.socket.on("close", () => fail(new Error("connection closed")));
  }

  /** Calls `path` with an encoded request message; resolves with status 0 and the response message, or a non-zero status. */
  unary(path: string, message: Buffer, metadata: Record<string, string>): Promise<{ status: number; message: string; body: Buffer }> {
    if (this.failure) return Promise.reject(this.failure);
    const streamId = this.nextStreamId;
    this.nextStreamId += 2;
    const block = Buffer.concat([this.pseudoHeaders, hpackLiteral(4, path), this.fixedHeaders, ...Object.entries(metadata).map(([k, v]) => hpackLiteral(k, v))]);
    const data = Buffer.allocUnsafe(5 + message.length);
    data[0] = 0;
    data.writeUInt32BE(message.length, 1);
    message.copy(data, 5);
    return new Promise((resolve, reject) => {
      this.calls.set(streamId, { chunks: [], resolve, reject });
      this.send(Buffer.concat([h2Frame(H2.HEADERS, 0x4 /* END_HEADERS */, streamId, block), h2Frame(H2.DATA, H2.END_STREAM, streamId, data)]), data.length);
    });
  }

  close(): void {
    this.socket.end();
  }

  /** Writes a call's frames once the connection window has room for its `size` DATA bytes. */
  private send(bytes: Buffer, size: number): void {
    if (this.blocked.length > 0 || size > this.sendWindow) {
      this.blocked.push({ bytes, size });
      return;
    }
    this.sendWindow -= size;
    this.socket.write(bytes);
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    let at = 0;
    while (this.buffer.length - at >= 9) {
      const length = this.buffer.readUIntBE(at, 3);
      if (this.buffer.length - at < 9 + length) break;
      const type = this.buffer[at + 3]!;
      const flags = this.buffer[at + 4]!;
      const streamId = this.buffer.readUInt32BE(at + 5) & 0x7fffffff;
      this.onFrame(type, flags, streamId, this.buffer.subarray(at + 9, at + 9 + length));
      at += 9 + length;
    }
    this.buffer = this.buffer.subarray(at);
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    const call = this.calls.get(streamId);
    switch (type) {
      case H2.DATA: {
        this.received += payload.length;
        if (this.received >= H2_RECEIVE_WINDOW / 2) {
          const increment = Buffer.allocUnsafe(4);
          increment.writeUInt32BE(this.received);
          this.socket.write(h2Frame(H2.WINDOW_UPDATE, 0, 0, increment));
          this.received = 0;
        }
        const body = flags & H2.PADDED ? payload.subarray(1, payload.length - payload[0]!) : payload;
        call?.chunks.push(body);
        if (flags & H2.END_STREAM) this.finish(streamId);
        return;
      }
      case H2.HEADERS: // response headers or trailers: not decoded (see the class comment)
        if (flags & H2.END_STREAM) this.finish(streamId);
        return;
      case H2.RST_STREAM:
        this.calls.delete(streamId);
        call?.reject(new Error(`stream reset (HTTP/2 error ${payload.readUInt32BE(0)})`));
        return;
      case H2.SETTINGS:
        if (!(flags & H2.ACK)) this.socket.write(h2Frame(H2.SETTINGS, H2.ACK, 0, Buffer.alloc(0)));
        return;
      case H2.PING:
        if (!(flags & H2.ACK)) this.socket.write(h2Frame(H2.PING, H2.ACK, 0, payload));
        return;
      case H2.WINDOW_UPDATE:
        if (streamId === 0) {
          this.sendWindow += payload.readUInt32BE(0) & 0x7fffffff;
          while (this.blocked.length > 0 && this.blocked[0]!.size <= this.sendWindow) {
            const { bytes, size } = this.blocked.shift()!;
            this.sendWindow -= size;
            this.socket.write(bytes);
          }
        }
        return;
      case H2.GOAWAY:
        this.fail(new Error(`GOAWAY (HTTP/2 error ${payload.readUInt32BE(4)})`));
        return;
    }
  }

  private finish(streamId: number): void {
    const call = this.calls.get(streamId);
    if (!call) return;
    this.calls.delete(streamId);
    const data = Buffer.concat(call.chunks);
    if (data.length >= 5 && data.length >= 5 + data.readUInt32BE(1)) call.resolve({ status: 0, message: "", body: data.subarray(5, 5 + data.readUInt32BE(1)) });
    else call.resolve({ status: 2, message: "the stream ended without a response message (a gRPC error)", body: Buffer.alloc(0) });
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const call of this.calls.values()) call.reject(err);
    this.calls.clear();
  }
}

/** Protobuf: one length-delimited field (wire type 2) with field number `field`. */
export function protoBytesField(field: number, value: Buffer): Buffer {
  const len: number[] = [];
  let n = value.length;
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    len.push(b);
  } while (n);
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...len]), value]);
}

/** Protobuf: the value of top-level varint field `field` (0 when absent). Skips other fields. */
export function protoVarintField(message: Buffer, field: number): number {
  let i = 0;
  const varint = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = message[i++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return v;
      shift += 7;
    }
  };
  while (i < message.length) {
    const key = varint();
    const wire = key & 7;
    if (key >>> 3 === field && wire === 0) return varint();
    if (wire === 0) varint();
    else if (wire === 2) {
      const length = varint(); // read before adding: `i += varint()` would add to the old i
      i += length;
    }
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else return 0;
  }
  return 0;
}

/** An activated agent with its private key. */
export interface BenchAgent {
  organizationId: string;
  apiKey: string;
  agentId: string;
  certificateId: string;
  privateKey: KeyObject;
}

/** Registers and activates an agent named `name` of `org` (as POST /v1/organizations answered it), acting for `principalId`, with a new key. */
export async function createAgent(client: HttpClient, org: { organization_id: string; api_key: string }, principalId: string, name: string): Promise<BenchAgent> {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  const agent = await client.json("POST", "/v1/agents", { name, acting_for_principal_id: principalId, public_key: `ed25519:base64:${raw.toString("base64")}` }, org.api_key);
  await client.json("POST", `/v1/agents/${agent.agent_id}/activate`, {}, org.api_key);
  return { organizationId: org.organization_id, apiKey: org.api_key, agentId: agent.agent_id, certificateId: agent.certificate_id, privateKey };
}

/** Creates `orgs` organizations (operator key) with `agentsPerOrg` active agents each. */
export async function createAgents(client: HttpClient, operatorKey: string, orgs: number, agentsPerOrg: number): Promise<BenchAgent[]> {
  const all: BenchAgent[] = [];
  await Promise.all(
    Array.from({ length: orgs }, async (_, o) => {
      const org = await client.json("POST", "/v1/organizations", { name: `bench org ${o} ${randomUUID().slice(0, 6)}` }, undefined, { "x-service-operator-key": operatorKey });
      const principal = await client.json("POST", "/v1/principals", { display_name: `Bench ${o}`, kind: "person" }, org.api_key);
      for (let a = 0; a < agentsPerOrg; a++) all.push(await createAgent(client, org, principal.principal_id, `bench-${o}-${a}`));
    }),
  );
  return all;
}

/** A signed Intent: the exact bytes, the certificate id and the signature (standard base64). */
export interface SignedIntent {
  agent: BenchAgent;
  bytes: Buffer;
  keyId: string;
  signature: string;
}

/** Signs `count` fresh Intents (reference_noop plus `fields`), round-robin over `agents`; sign right before use (±300 s window). */
export function signIntents(agents: readonly BenchAgent[], count: number, fields: Record<string, unknown> = {}): SignedIntent[] {
  const out: SignedIntent[] = new Array(count);
  const requestedAt = new Date().toISOString();
  for (let i = 0; i < count; i++) {
    const agent = agents[i % agents.length]!;
    const bytes = Buffer.from(JSON.stringify({ agent_id: agent.agentId, action: "reference_noop", ...fields, requested_at: requestedAt, nonce: randomUUID() }), "utf8");
    out[i] = { agent, bytes, keyId: agent.certificateId, signature: sign(null, bytes, agent.privateKey).toString("base64") };
  }
  return out;
}

/** p50/p99/max of latencies in milliseconds. */
export interface Latency {
  p50: number;
  p99: number;
  max: number;
}

export function latencyOf(samples: number[]): Latency {
  if (samples.length === 0) return { p50: NaN, p99: NaN, max: NaN };
  const s = Float64Array.from(samples).sort();
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(s.length * q))]!;
  return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1]! };
}

/** What a load run measured. */
export interface RunResult {
  /** Operations that completed as expected. */
  ok: number;
  /** Operations that failed (unexpected status or an exception), with a sample of why. */
  failed: number;
  failures: string[];
  seconds: number;
  perSecond: number;
  latency: Latency;
  /** How many operations were started (the rest of the prepared ones are left unused). */
  used: number;
  /** Open loop only: the service fell so far behind that the generator stopped offering. */
  saturated: boolean;
  /** The load generator's own garbage-collection pauses during the run: they delay sending and receiving alike. */
  generatorGc: { pauses: number; maxMs: number };
}

/** One operation of a load run: resolves true when the answer was the expected one, or a string saying what went wrong. */
export type Operation = (i: number) => Promise<true | string>;

/**
 * Starts a run: the load generator first collects its own garbage when node runs with
 * --expose-gc (`npm run bench` does), as JMH does between iterations, so that a full collection
 * of what it allocated for earlier runs (tens of thousands of signed requests) does not land
 * inside this one; then watches its collection pauses until `collect`.
 */
function startRun(): { started: number; gc: RunResult["generatorGc"]; stopWatching(): void } {
  (globalThis as { gc?: () => void }).gc?.();
  const gc = { pauses: 0, maxMs: 0 };
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.pauses++;
      gc.maxMs = Math.max(gc.maxMs, entry.duration);
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  return { started: performance.now(), gc, stopWatching: () => observer.disconnect() };
}

function collect(run: ReturnType<typeof startRun>, latencies: number[], failures: string[], ok: number, failed: number, used: number, saturated = false): RunResult {
  run.stopWatching();
  const seconds = (performance.now() - run.started) / 1000;
  return { ok, failed, failures: failures.slice(0, 5), seconds, perSecond: ok / seconds, latency: latencyOf(latencies), used, saturated, generatorGc: run.gc };
}

/** Closed loop: `concurrency` workers run operations 0..total-1 back to back as fast as the service answers, for at most `maxSeconds`. */
export async function closedLoop(concurrency: number, total: number, op: Operation, maxSeconds = Infinity): Promise<RunResult> {
  const latencies: number[] = [];
  const failures: string[] = [];
  let next = 0;
  let ok = 0;
  let failed = 0;
  const run = startRun();
  const deadline = run.started + maxSeconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < total && performance.now() < deadline; i = next++) {
        const t0 = performance.now();
        const r = await op(i).catch((err: unknown) => String(err));
        latencies.push(performance.now() - t0);
        if (r === true) ok++;
        else {
          failed++;
          if (failures.length < 20) failures.push(r);
        }
      }
    }),
  );
  return collect(run, latencies, failures, ok, failed, Math.min(next, total));
}

/**
 * Open loop: operation i is due at start + i/rate, whatever the service does; latency is measured
 * from that due time (so a stall is not hidden by the generator waiting on it). When more than
 * `maxInFlight` are outstanding the service cannot keep up: offering stops (result.saturated).
 * The first `lead` operations run at the same rate without a break but are reported apart
 * (result.lead): what follows a change of load, against the steady state measured after it.
 */
export async function openLoop(
  rate: number,
  total: number,
  op: Operation,
  { maxInFlight = rate, lead = 0 }: { maxInFlight?: number; lead?: number } = {},
): Promise<RunResult & { lead: Latency | null }> {
  const latencies: number[] = [];
  const leadLatencies: number[] = [];
  const failures: string[] = [];
  const pending = new Set<Promise<void>>();
  let ok = 0;
  let failed = 0;
  let saturated = false;
  const run = startRun();
  const started = run.started;
  let sent = 0;
  while (sent < total && !saturated) {
    const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000) + 1);
    while (sent < due) {
      if (pending.size >= maxInFlight) {
        saturated = true;
        break;
      }
      const i = sent++;
      const dueAt = started + (i * 1000) / rate;
      const p: Promise<void> = op(i)
        .catch((err: unknown) => String(err))
        .then((r) => {
          pending.delete(p);
          (i < lead ? leadLatencies : latencies).push(performance.now() - dueAt);
          // ok counts the steady part; a failure anywhere is one.
          if (r === true) ok += i < lead ? 0 : 1;
          else {
            failed++;
            if (failures.length < 20) failures.push(r);
          }
        });
      pending.add(p);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(pending);
  // The steady part's clock starts when its first operation was due.
  run.started += (Math.min(lead, sent) * 1000) / rate;
  const result = collect(run, latencies, failures, ok, failed, sent - Math.min(lead, sent), saturated);
  return { ...result, lead: lead > 0 ? latencyOf(leadLatencies) : null };
}

const n = (x: number, digits = 0) => (Number.isFinite(x) ? x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }) : "n/a");

const latencyColumns = (l: Latency) => `p50 ${n(l.p50, 2).padStart(7)} ms   p99 ${n(l.p99, 2).padStart(7)} ms   max ${n(l.max, 1).padStart(7)} ms`;

/** One result as a line: rate, p50/p99/max, failures. */
export function describeRun(label: string, r: RunResult): string {
  const gc = r.generatorGc.maxMs >= 5 ? `   load generator GC: ${r.generatorGc.pauses} pauses, longest ${n(r.generatorGc.maxMs, 1)} ms` : "";
  const fail = (r.saturated ? "  SATURATED: the service fell behind the offered rate; offering stopped" : "") + (r.failed ? `  FAILED ${r.failed} (e.g. ${r.failures[0]})` : "");
  return `  ${label.padEnd(52)} ${n(r.perSecond).padStart(7)}/s   ${latencyColumns(r.latency)}   (${n(r.ok)} in ${n(r.seconds, 1)} s)${gc}${fail}`;
}

/** Latencies alone as a line, aligned with describeRun's (an open loop's lead). */
export function describeLatency(label: string, l: Latency, note: string): string {
  return `  ${label.padEnd(52)} ${"".padStart(9)}   ${latencyColumns(l)}   (${note})`;
}

/** The service's garbage collections so far, by kind (prom-client's nodejs_gc_duration_seconds: major, minor, incremental, weakcb). */
export async function serviceGc(baseUrl: string): Promise<Map<string, { count: number; seconds: number }>> {
  // fetch, not HttpClient: the metrics come chunked.
  const text = await (await fetch(new URL("/metrics", baseUrl))).text();
  const byKind = new Map<string, { count: number; seconds: number }>();
  for (const [, part, kind, value] of text.matchAll(/^nodejs_gc_duration_seconds_(count|sum)\{kind="(\w+)"\} (\S+)$/gm)) {
    const entry = byKind.get(kind!) ?? { count: 0, seconds: 0 };
    if (part === "count") entry.count = Number(value);
    else entry.seconds = Number(value);
    byKind.set(kind!, entry);
  }
  return byKind;
}

/** What the service collected between two {@link serviceGc} readings, as a line: full (major) and young (minor) collections. */
export function describeServiceGc(label: string, before: Map<string, { count: number; seconds: number }>, after: Map<string, { count: number; seconds: number }>): string {
  const delta = (kind: string) => {
    const a = after.get(kind) ?? { count: 0, seconds: 0 };
    const b = before.get(kind) ?? { count: 0, seconds: 0 };
    return `${n(a.count - b.count)} (${n((a.seconds - b.seconds) * 1000, 1)} ms in all)`;
  };
  return `  ${label}: full collections ${delta("major")}, young collections ${delta("minor")}`;
}

/** "value vs target → ratio" for the summary. */
export function versus(label: string, value: number, target: number, unit: string, higherIsBetter = true): string {
  const ratio = higherIsBetter ? value / target : target / value;
  const verdict = ratio >= 1 ? "meets" : "misses";
  return `  ${label.padEnd(52)} ${n(value, unit === "ms" ? 2 : 0).padStart(8)} ${unit.padEnd(4)} target ${higherIsBetter ? "≥" : "<"} ${n(target)} ${unit}  → ${verdict} (${ratio.toFixed(2)}x)`;
}

/** Formats a number for the summary. */
export const fmt = n;

/** True when the module at `url` is the entry point (`tsx bench/x.ts`), false when imported by bench/run.ts. */
export function isMain(url: string): boolean {
  return process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(url);
}
