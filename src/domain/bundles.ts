import { buildBundle } from "../policy/build.js";
import { PolicyCompileError } from "../policy/errors.js";
import type { AuthorityGraph } from "../policy/graph-types.js";
import type { Publication } from "../storage/policies.js";
import { MandateError } from "../base/errors.js";

/** A module of a bundle: one policy version's Rego, and the source it was compiled from. */
export interface BundleModule {
  policy_key: string;
  version: number;
  rego: string;
  source?: { rego?: string };
}

/** A bundle opa refused, as callers see it: 422 `policy_compile_failed` with opa's located errors. */
export function compileFailed(err: PolicyCompileError): MandateError {
  return new MandateError(
    "policy_compile_failed",
    "The policy does not compile; the previously active version stays active.",
    err.errors.map((e) => ({ field: e.file ?? e.policy_key ?? "source", code: e.code ?? "compile_error", message: e.message, line: e.line, column: e.column })),
  );
}

/** Builds an organization's bundle from the given modules and graph: the bundle and the head that would point at it; 422 `policy_compile_failed` when it does not compile. */
export async function buildOrgBundle(
  modules: BundleModule[],
  graph: { version: number; graph: AuthorityGraph } | null,
): Promise<Omit<Publication, "evidence">> {
  let built;
  try {
    const policies = modules.map((m) => ({ policy_key: m.policy_key, version: m.version, rego: m.rego, handwritten: Boolean(m.source?.rego) }));
    built = await buildBundle({ policies, graph: graph?.graph ?? null, graph_version: graph?.version ?? null });
  } catch (err) {
    if (err instanceof PolicyCompileError) throw compileFailed(err);
    throw err;
  }
  return {
    bundle: { digest: built.digest, bytes: built.bundle },
    head: {
      bundle_digest: built.digest,
      policy_versions: Object.fromEntries(modules.map((m) => [m.policy_key, m.version])),
      graph_version: graph?.version ?? 0,
    },
  };
}
