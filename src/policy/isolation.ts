import { Worker } from "node:worker_threads";
import { EvaluationError, EvaluationTimeoutError, evaluationFailure } from "./errors.js";

/** What a lane needs to evaluate a bundle in its worker: the module compiled on the main thread, shared by cloning. */
export interface IsolatedBundle {
  digest: string;
  module: WebAssembly.Module;
  data: ArrayBuffer;
  entrypoint: number;
}

/** An evaluation that finished in the worker: opa-wasm's result set and how long evaluate() took there. */
export interface IsolatedResult {
  resultSet: unknown;
  ms: number;
}

interface Job {
  bundle: IsolatedBundle;
  input: unknown;
  resolve: (result: IsolatedResult) => void;
  reject: (err: unknown) => void;
}

type Reply = { ok: true; ready?: true; resultSet?: unknown; ms?: number } | { ok: false; error: string };

// Loading a bundle runs no policy code (instantiation and data), so it gets a bound of its own,
// generous, outside the evaluation's limit; so does starting a thread.
const START_TIMEOUT_MS = 10_000;
// Bundles kept instantiated in one worker; past it the least recently loaded is unloaded.
const WORKER_CAPACITY = 16;
// A worker idle this long is stopped (and started again when needed): an idle isolate with its
// instantiated bundles only holds memory.
const IDLE_STOP_MS = 5_000;

/**
 * How long an evaluation may run in the worker before the thread is stopped: the limit plus a
 * slack. The limit applies to the evaluation itself, which the worker times and the engine judges
 * (an evaluation that finished past it is refused all the same); the slack keeps time a loaded
 * machine spends scheduling the thread and passing messages from being counted against a policy.
 */
export function hardDeadlineMs(limitMs: number): number {
  return limitMs + Math.max(4 * limitMs, 200);
}

/**
 * One worker thread evaluating bundles one at a time, each under a hard deadline: an evaluation
 * still running at `hardDeadlineMs(timeoutMs)` is stopped by terminating the thread (WebAssembly
 * on the main thread cannot be interrupted; a worker can), which is replaced for the next job.
 * Jobs wait in a bounded queue; past `maxQueue` they are refused at once.
 */
export class EvaluationLane {
  private worker: Worker | null = null;
  private starting: Promise<Worker> | null = null;
  private readonly loaded = new Set<string>();
  private readonly queue: Job[] = [];
  private running = false;
  private pending: { resolve: (reply: Reply) => void; reject: (err: unknown) => void } | null = null;
  private idle: NodeJS.Timeout | null = null;
  /** Workers terminated because an evaluation passed its deadline. */
  terminated = 0;

  constructor(
    readonly name: string,
    private readonly timeoutMs: number,
    private readonly maxQueue = 64,
  ) {}

  /** Evaluates `input` against `bundle` in the worker; rejects with EvaluationTimeoutError past the deadline or when the queue is full. */
  run(bundle: IsolatedBundle, input: unknown): Promise<IsolatedResult> {
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(new EvaluationTimeoutError(bundle.digest, this.timeoutMs, "queue_full", `the ${this.name} evaluation queue is full`));
    }
    return new Promise<IsolatedResult>((resolve, reject) => {
      this.queue.push({ bundle, input, resolve, reject });
      void this.pump();
    });
  }

  /** Stops the worker (jobs still queued are refused). */
  async close(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    for (const job of this.queue.splice(0)) job.reject(new EvaluationError("the evaluation lane is closed"));
    const worker = this.worker;
    this.reset();
    await worker?.terminate();
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    try {
      for (let job = this.queue.shift(); job; job = this.queue.shift()) {
        try {
          job.resolve(await this.evaluate(job));
        } catch (err) {
          job.reject(err);
        }
      }
    } finally {
      this.running = false;
      this.idle = setTimeout(() => this.stopIdle(), IDLE_STOP_MS);
      this.idle.unref();
    }
  }

  /** Stops the worker after IDLE_STOP_MS without a job (the next job starts a fresh one). */
  private stopIdle(): void {
    this.idle = null;
    if (this.running || this.queue.length > 0 || !this.worker) return;
    const worker = this.worker;
    this.reset();
    void worker.terminate().catch(() => undefined);
  }

  private async evaluate(job: Job): Promise<IsolatedResult> {
    const { digest, module, data, entrypoint } = job.bundle;
    if (!this.loaded.has(digest)) {
      const worker = await this.ready();
      if (this.loaded.size >= WORKER_CAPACITY) {
        const oldest = this.loaded.values().next().value as string;
        await this.call(worker, { type: "unload", digest: oldest }, START_TIMEOUT_MS, () => new EvaluationError("unloading a bundle in the worker timed out"));
        this.loaded.delete(oldest);
      }
      await this.call(worker, { type: "load", digest, module, data }, START_TIMEOUT_MS, () => new EvaluationError(`loading bundle ${digest} in the worker timed out`));
      this.loaded.add(digest);
    }
    const worker = await this.ready();
    const reply = await this.call(
      worker,
      { type: "eval", digest, entrypoint, input: job.input },
      hardDeadlineMs(this.timeoutMs),
      () =>
        new EvaluationTimeoutError(digest, this.timeoutMs, "timeout", `the evaluation was stopped after ${hardDeadlineMs(this.timeoutMs)} ms, past the ${this.timeoutMs} ms limit`),
      evaluationFailure,
    ).catch((err: unknown) => {
      // The worker drops an instance whose evaluation failed: load it again next time, or every
      // later evaluation of the bundle (any action) would fail as "not loaded".
      this.loaded.delete(digest);
      throw err;
    });
    return { resultSet: reply.resultSet, ms: reply.ms ?? 0 };
  }

  // One message at a time: the reply to `message` is the worker's next message.
  private call(
    worker: Worker,
    message: unknown,
    timeoutMs: number,
    timeoutError: () => Error,
    failure: (error: string) => Error = (error) => new EvaluationError(`evaluation failed: ${error}`),
  ): Promise<Reply & { ok: true }> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = null;
        this.terminated++;
        void this.replace();
        reject(timeoutError());
      }, timeoutMs);
      this.pending = {
        resolve: (reply) => {
          clearTimeout(timer);
          if (reply.ok) resolve(reply);
          else reject(failure(reply.error));
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      worker.postMessage(message);
    });
  }

  // The worker, started when needed (and at once after a termination, so the next job finds it warm).
  private ready(): Promise<Worker> {
    if (this.worker) return Promise.resolve(this.worker);
    if (!this.starting) {
      const starting = this.start().then(
        (worker) => {
          if (this.starting === starting) {
            this.worker = worker;
            this.starting = null;
          }
          return worker;
        },
        (err: unknown) => {
          if (this.starting === starting) this.starting = null;
          throw err;
        },
      );
      this.starting = starting;
    }
    return this.starting;
  }

  private start(): Promise<Worker> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(new URL("./evaluation-worker.mjs", import.meta.url));
      worker.unref();
      const timer = setTimeout(() => {
        void worker.terminate();
        reject(new EvaluationError("the evaluation worker did not start"));
      }, START_TIMEOUT_MS);
      worker.once("message", () => {
        clearTimeout(timer);
        worker.on("message", (reply: Reply) => {
          const pending = this.pending;
          this.pending = null;
          pending?.resolve(reply);
        });
        resolve(worker);
      });
      const failed = (err: unknown) => {
        clearTimeout(timer);
        if (this.worker === worker) {
          const pending = this.pending;
          this.pending = null;
          this.reset();
          pending?.reject(new EvaluationError(`the evaluation worker stopped: ${err instanceof Error ? err.message : String(err)}`));
        }
        reject(err instanceof Error ? err : new EvaluationError(String(err)));
      };
      worker.once("error", failed);
      worker.once("exit", (code) => failed(new EvaluationError(`exit code ${code}`)));
    });
  }

  // Terminates the current worker (stopping whatever it runs) and starts its replacement.
  private async replace(): Promise<void> {
    const worker = this.worker;
    this.reset();
    this.ready().catch(() => undefined);
    if (worker) await worker.terminate().catch(() => undefined);
  }

  private reset(): void {
    this.worker = null;
    this.starting = null;
    this.loaded.clear();
  }
}
