import { verify, type KeyObject } from "node:crypto";
import { Worker } from "node:worker_threads";

/**
 * The worker's whole program. A string rather than a module file so it runs the
 * same under tsx, vitest and compiled output: it is plain CommonJS and needs no loader.
 * Input: `[id, buffer, ends]`, the buffer holding each job as raw 32-byte key, 64-byte
 * signature and message, `ends[i]` where job i stops; output: `[id, Uint8Array of 1/0]`.
 */
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { createPublicKey, verify } = require("node:crypto");
const keys = new Map();
function keyOf(raw) {
  const x = Buffer.from(raw).toString("base64url");
  let key = keys.get(x);
  if (!key) {
    if (keys.size > 50000) keys.clear();
    key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x }, format: "jwk" });
    keys.set(x, key);
  }
  return key;
}
parentPort.on("message", ([id, buffer, ends]) => {
  const bytes = new Uint8Array(buffer);
  const valid = new Uint8Array(ends.length);
  let at = 0;
  for (let i = 0; i < ends.length; i++) {
    const key = bytes.subarray(at, at + 32);
    const signature = bytes.subarray(at + 32, at + 96);
    const message = bytes.subarray(at + 96, ends[i]);
    at = ends[i];
    try {
      valid[i] = verify(null, message, keyOf(key), signature) ? 1 : 0;
    } catch {
      valid[i] = 0;
    }
  }
  parentPort.postMessage([id, valid]);
});
`;

interface Job {
  key: Uint8Array;
  message: Uint8Array;
  signature: Uint8Array;
  resolve(valid: boolean): void;
  reject(err: unknown): void;
}

interface Thread {
  worker: Worker;
  inFlight: Map<number, Job[]>;
}

/**
 * Ed25519 verification off the event loop. Verifying is the largest single
 * CPU cost of a signed request (~120 µs here); on worker threads it runs
 * beside the event loop, which then only pays for handing the bytes over.
 * Requests arriving in the same turn of the loop travel as one message.
 * With no threads (`threads = 0`) it verifies inline.
 */
export class Ed25519Verifier {
  private readonly threads: Thread[] = [];
  private queue: Job[] = [];
  private flushScheduled = false;
  private nextId = 1;
  private closed = false;

  constructor(private readonly threadCount: number) {
    for (let i = 0; i < threadCount; i++) this.threads.push(this.spawn());
  }

  /** Whether `signature` is `key`'s signature of `message`; `raw` is the same key as 32 bytes. */
  verify(key: KeyObject, raw: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
    if (this.threads.length === 0) return Promise.resolve(verify(null, message, key, signature));
    return new Promise((resolve, reject) => {
      this.queue.push({ key: raw, message, signature, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Stops the threads; verifications still in flight are refused. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }

  private flush(): void {
    this.flushScheduled = false;
    const jobs = this.queue;
    this.queue = [];
    if (jobs.length === 0) return;
    // The least busy thread takes the whole turn's work.
    const thread = this.threads.reduce((a, b) => (b.inFlight.size < a.inFlight.size ? b : a));
    const id = this.nextId++;
    thread.inFlight.set(id, jobs);
    // One packed buffer, transferred rather than copied: a request's bytes are often a view
    // into a much larger network buffer, which structured cloning would copy whole.
    const ends = new Uint32Array(jobs.length);
    let size = 0;
    jobs.forEach((j, i) => (ends[i] = size += 96 + j.message.length));
    const packed = new Uint8Array(size);
    let at = 0;
    for (const j of jobs) {
      packed.set(j.key, at);
      packed.set(j.signature, at + 32);
      packed.set(j.message, at + 96);
      at += 96 + j.message.length;
    }
    thread.worker.postMessage([id, packed.buffer, ends], [packed.buffer]);
  }

  private spawn(): Thread {
    const thread: Thread = { worker: new Worker(WORKER_SOURCE, { eval: true }), inFlight: new Map() };
    // The threads never keep the process alive by themselves.
    thread.worker.unref();
    thread.worker.on("message", ([id, valid]: [number, Uint8Array]) => {
      const jobs = thread.inFlight.get(id);
      thread.inFlight.delete(id);
      jobs?.forEach((job, i) => job.resolve(valid[i] === 1));
    });
    const fail = (err: unknown) => {
      for (const jobs of thread.inFlight.values()) for (const job of jobs) job.reject(err);
      thread.inFlight.clear();
      if (this.closed) return;
      // A thread that died is replaced, so one fault does not slow every later request.
      const index = this.threads.indexOf(thread);
      if (index >= 0) this.threads[index] = this.spawn();
    };
    thread.worker.on("error", fail);
    thread.worker.on("exit", () => fail(new Error("signature verification thread exited")));
    return thread;
  }
}
