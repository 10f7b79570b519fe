import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** Request metrics for both transports, exposed at GET /metrics (Prometheus text format). */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: "mandate_requests_total",
    help: "Requests by transport, RPC and outcome code (ok, the error detail, or client_closed for a client that went away mid-request).",
    labelNames: ["protocol", "rpc", "detail"] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: "mandate_request_duration_seconds",
    help: "Request duration by transport and RPC.",
    labelNames: ["protocol", "rpc"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Counts one finished request. */
  observe(protocol: string, rpc: string, detail: string, ms: number): void {
    this.requests.inc({ protocol, rpc, detail });
    this.duration.observe({ protocol, rpc }, ms / 1000);
  }

  /** The exposition text. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
