import { buildBundle } from "../policy/build.js";
import { PolicyCompileError } from "../policy/errors.js";
import type { AuthorityGraph } from "../policy/graph-types.js";
import type { PolicyStore, Publication } from "../storage/policies.js";
import { MandateError, notFound, validationFailed } from "../base/errors.js";

/** A module of a bundle: one policy version's Rego, and the source it was compiled from. */
export interface BundleModule {
  policy_key: string;
  version: number;
  rego: string;
  source?: { rego?: string };
}

// What the builder needs of each module: a hand-written one is schema-checked and isolated.
function bundlePolicies(modules: readonly BundleModule[]) {
  return modules.map((m) => ({ policy_key: m.policy_key, version: m.version, rego: m.rego, handwritten: Boolean(m.source?.rego) }));
}

/** A bundle opa refused, as callers see it: 422 `policy_compile_failed` with opa's located errors. */
export function compileFailed(err: PolicyCompileError, message = "The policy does not compile; the previously active version stays active."): MandateError {
  return new MandateError(
    "policy_compile_failed",
    message,
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
    built = await buildBundle({ policies: bundlePolicies(modules), graph: graph?.graph ?? null, graph_version: graph?.version ?? null });
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

/**
 * Compiles a new policy version as publishing it would (docs/architecture.md, Policies): the
 * organization's active versions with `draft` in place of its policy's, and the active graph,
 * through the same build (the built-in allowlist, constant actions, opa's checks). Stores
 * nothing. Throws 422 `policy_compile_failed` with located errors, so a version that could
 * never be published is never created.
 */
export async function checkVersionCompiles(
  active: readonly BundleModule[],
  draft: BundleModule,
  graph: { version: number; graph: AuthorityGraph } | null,
): Promise<void> {
  const modules = [...active.filter((m) => m.policy_key !== draft.policy_key), draft];
  try {
    await buildBundle({ policies: bundlePolicies(modules), graph: graph?.graph ?? null, graph_version: graph?.version ?? null });
  } catch (err) {
    if (err instanceof PolicyCompileError) throw compileFailed(err, "The policy version does not compile as publishing would build it; nothing was created.");
    throw err;
  }
}

/**
 * A bundle for download (GET /v1/bundles/{digest}): the exact stored bytes, whose sha256 is
 * `digest`, when the organization has used it (storage's organizationBundle) or it is the
 * starter bundle every organization starts with; 404 otherwise, also for another
 * organization's bundle.
 */
export async function downloadableBundle(
  store: Pick<PolicyStore, "bundle" | "organizationBundle">,
  organizationId: string,
  digest: string,
  starterDigest: string | undefined,
): Promise<Buffer> {
  if (!/^[0-9a-f]{64}$/.test(digest)) throw validationFailed([{ field: "digest", code: "invalid_format", message: "a bundle digest is 64 lowercase hex characters (sha256)" }]);
  const bytes = digest === starterDigest ? await store.bundle(digest) : await store.organizationBundle(organizationId, digest);
  if (!bytes) throw notFound("Bundle");
  return bytes;
}
