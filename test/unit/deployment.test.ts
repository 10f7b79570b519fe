import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

/*
 * The Dockerfile and compose.yaml cannot be built or run here (no container engine on this
 * machine; docs/deployment.md says so), so this checks what can be checked without one: they
 * parse, every file they name exists, and the services are wired to each other.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const read = (file: string) => readFileSync(path.join(root, file), "utf8");

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Dockerfile instructions: comments and blank lines dropped, `\` continuations joined. */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = "";
  let start = 0;
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!pending && (line === "" || line.startsWith("#"))) return;
    if (!pending) start = i + 1;
    pending += (pending ? " " : "") + line.replace(/\\$/, "").trim();
    if (line.endsWith("\\")) return;
    const m = /^([A-Za-z]+)\s+(.*)$/.exec(pending);
    if (!m) throw new Error(`Dockerfile line ${start}: not an instruction: ${pending}`);
    out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!, line: start });
    pending = "";
  });
  expect(pending, "a continuation runs off the end").toBe("");
  return out;
}

/** The instructions of each stage, by its name (`FROM … AS name`). */
function stages(instructions: Instruction[]): Map<string, Instruction[]> {
  const byName = new Map<string, Instruction[]>();
  let current: Instruction[] | null = null;
  for (const ins of instructions) {
    if (ins.keyword === "FROM") {
      const m = /\s+AS\s+(\S+)$/i.exec(ins.args);
      expect(m, `FROM at line ${ins.line} names its stage`).not.toBeNull();
      current = [];
      byName.set(m![1]!, current);
    } else if (current) current.push(ins);
  }
  return byName;
}

const dockerfile = parseDockerfile(read("Dockerfile"));
const byStage = stages(dockerfile);
const compose = parse(read("compose.yaml")) as { services: Record<string, any>; networks?: Record<string, any>; volumes?: Record<string, unknown> };

describe("Dockerfile", () => {
  it("has only known instructions, and the stages opa (Go), build and runtime", () => {
    const known = new Set(["FROM", "ARG", "ENV", "WORKDIR", "COPY", "RUN", "USER", "EXPOSE", "HEALTHCHECK", "CMD"]);
    for (const ins of dockerfile) expect(known, `line ${ins.line}: ${ins.keyword}`).toContain(ins.keyword);
    expect([...byStage.keys()]).toEqual(["opa", "build", "runtime"]);
    expect(dockerfile.find((i) => i.keyword === "FROM" && /AS opa$/.test(i.args))!.args).toMatch(/^\$\{GO_IMAGE\}/);
    expect(dockerfile.find((i) => i.keyword === "ARG" && i.args.startsWith("GO_IMAGE="))!.args).toMatch(/^GO_IMAGE=golang:/);
  });

  it("builds the opa version scripts/setup.sh pins, from the Go module proxy", () => {
    const pinned = /^OPA_VERSION=(\S+)$/m.exec(read("scripts/setup.sh"))![1];
    expect(dockerfile.find((i) => i.keyword === "ARG" && i.args.startsWith("OPA_VERSION="))!.args).toBe(`OPA_VERSION=${pinned}`);
    expect(byStage.get("opa")!.some((i) => i.keyword === "RUN" && i.args.includes('go install "github.com/open-policy-agent/opa@${OPA_VERSION}"'))).toBe(true);
  });

  it("copies only files that exist into the build, and only what earlier stages made into the runtime", () => {
    const made = new Map<string, Set<string>>([
      ["opa", new Set(["/out/opa"])],
      // What the build stage has: its COPY destinations under /app, and what it builds.
      ["build", new Set(["/app/package.json", "/app/package-lock.json", "/app/tsconfig.json", "/app/node_modules", "/app/dist", "/app/console/dist"])],
    ]);
    for (const [stage, instructions] of byStage) {
      for (const ins of instructions.filter((i) => i.keyword === "COPY")) {
        const words = ins.args.split(/\s+/);
        const from = words.find((w) => w.startsWith("--from="))?.slice("--from=".length);
        const paths = words.filter((w) => !w.startsWith("--"));
        const sources = paths.slice(0, -1);
        expect(sources.length, `line ${ins.line}`).toBeGreaterThan(0);
        for (const source of sources) {
          if (from) {
            expect(byStage.has(from), `line ${ins.line}: stage ${from}`).toBe(true);
            expect(made.get(from)!, `line ${ins.line}: ${source} is made by stage ${from}`).toContain(source);
          } else {
            expect(existsSync(path.join(root, source)), `line ${ins.line}: ${source} exists`).toBe(true);
            if (stage === "build") {
              const dest = paths.at(-1)!;
              const base = dest === "./" ? `/app/${path.basename(source)}` : `/app/${dest.replace(/^\.\//, "")}`;
              made.get("build")!.add(base);
            }
          }
        }
      }
    }
    // What the runtime takes from the build stage was copied or built there.
    expect([...made.get("build")!]).toEqual(expect.arrayContaining(["/app/src", "/app/policies", "/app/scripts"]));
  });

  it("runs the service as a non-root user, on the port compose.yaml wires, with opa where MANDATE_OPA_PATH says", () => {
    const runtime = byStage.get("runtime")!;
    const users = runtime.filter((i) => i.keyword === "USER");
    expect(users.at(-1)?.args).toBe("node");
    const env = runtime.filter((i) => i.keyword === "ENV").map((i) => i.args).join(" ");
    expect(env).toContain("MANDATE_OPA_PATH=/usr/local/bin/opa");
    expect(env).toContain("HOST=0.0.0.0");
    expect(runtime.some((i) => i.keyword === "COPY" && i.args === "--from=opa /out/opa /usr/local/bin/opa")).toBe(true);
    expect(runtime.find((i) => i.keyword === "EXPOSE")!.args).toBe("8080");
    // What `npm start` runs: the compiled CLI's serve, built by `npm run build` in the build stage.
    const cmd = JSON.parse(runtime.find((i) => i.keyword === "CMD")!.args) as string[];
    const start = (JSON.parse(read("package.json")) as { scripts: { start: string } }).scripts.start;
    expect(cmd).toEqual(["node", "dist/cli/main.js", "serve"]);
    expect(start).toBe("exec node dist/cli/main.js serve");
    expect(byStage.get("build")!.some((i) => i.keyword === "RUN" && i.args.startsWith("npm run build "))).toBe(true);
  });

  it("keeps dependencies, local state and secrets out of the build context", () => {
    const ignored = read(".dockerignore").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", ".mandate", ".tools", ".git", "dist"]));
  });
});

describe("compose.yaml", () => {
  const services = compose.services;

  it("runs two Mandate replicas, Postgres, Redis and a load balancer", () => {
    expect(Object.keys(services).sort()).toEqual(["lb", "mandate-1", "mandate-2", "postgres", "redis"]);
    expect(services["mandate-1"]).toEqual(services["mandate-2"]);
    expect(services["mandate-1"].build).toBe(".");
    expect(existsSync(path.join(root, "Dockerfile"))).toBe(true);
  });

  it("wires each replica to Postgres (two roles), Redis and the proxy it trusts", () => {
    const env = services["mandate-1"].environment as Record<string, string>;
    expect(env.DATABASE_URL).toMatch(/^postgres:\/\/mandate_service:\$\{MANDATE_SERVICE_PASSWORD:\?[^}]+\}@postgres:5432\/mandate$/);
    expect(env.MANDATE_MIGRATION_DATABASE_URL).toMatch(/^postgres:\/\/mandate_owner:\$\{MANDATE_OWNER_PASSWORD:\?[^}]+\}@postgres:5432\/mandate$/);
    expect(env.REDIS_URL).toBe("redis://redis:6379");
    expect(env.MANDATE_OPERATOR_KEY).toMatch(/^\$\{MANDATE_OPERATOR_KEY:\?/);
    expect(env.HOST).toBe("0.0.0.0");
    expect(services["mandate-1"].depends_on).toEqual({ postgres: { condition: "service_healthy" }, redis: { condition: "service_healthy" } });
    // The one address trusted for X-Forwarded-For is the load balancer's fixed address.
    expect(env.MANDATE_TRUSTED_PROXIES).toBe(services.lb.networks.mandate.ipv4_address);
    const subnet = compose.networks!.mandate.ipam.config[0].subnet as string;
    expect(env.MANDATE_TRUSTED_PROXIES!.split(".").slice(0, 3)).toEqual(subnet.split("/")[0]!.split(".").slice(0, 3));
  });

  it("mounts only files that exist; Postgres makes the two roles the replicas log in as", () => {
    for (const [name, service] of Object.entries(services)) {
      for (const volume of (service.volumes ?? []) as string[]) {
        const source = volume.split(":")[0]!;
        if (!source.startsWith(".")) {
          expect(compose.volumes, `${name}: named volume ${source}`).toHaveProperty(source);
          continue;
        }
        expect(existsSync(path.join(root, source)), `${name}: ${source}`).toBe(true);
      }
    }
    const init = read("deploy/postgres/init-roles.sh");
    expect(statSync(path.join(root, "deploy/postgres/init-roles.sh")).mode & 0o111).not.toBe(0);
    expect(init).toContain("CREATE ROLE mandate_owner LOGIN");
    expect(init).toContain("CREATE ROLE mandate_service LOGIN");
    expect(init).toContain("CREATE DATABASE mandate OWNER mandate_owner");
    for (const variable of ["MANDATE_OWNER_PASSWORD", "MANDATE_SERVICE_PASSWORD"]) expect(services.postgres.environment).toHaveProperty(variable);
  });

  it("balances both replicas behind nginx: HTTP/1.1 on 8080, gRPC on 8081", () => {
    expect(services.lb.ports).toEqual(["8080:8080", "8081:8081"]);
    const conf = read("deploy/nginx.conf");
    // Balanced braces: a cheap parse check of the nginx syntax.
    expect(conf.split("{").length).toBe(conf.split("}").length);
    for (const replica of ["mandate-1", "mandate-2"]) {
      expect(conf).toContain(`server ${replica}:8080`);
      expect(services[replica].expose).toEqual(["8080"]);
    }
    expect(conf).toMatch(/listen 8080;/);
    expect(conf).toMatch(/listen 8081;\s*http2 on;/);
    expect(conf).toContain("grpc_pass grpc://mandate_grpc;");
    expect(conf).toContain("proxy_pass http://mandate_http;");
    expect(conf).toContain("X-Forwarded-For $proxy_add_x_forwarded_for");
  });
});
