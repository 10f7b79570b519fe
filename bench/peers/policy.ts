// The one policy `npm run bench:peers` measures, expressed natively for each of the three
// systems: the starter action (reference_noop, always allowed) plus a vendor-payment authority
// check over a 1,000-principal graph (each principal holds one of 20 roles; each role may pay
// up to its limit in USD and EUR; no limit in any other currency). The same cases (principal,
// action, amount, currency) go to every system, and `expected` is the oracle all three must
// agree with before anything is measured.
//
// Delegation chains and approval bands (bench/policy.ts's graph) are left out on purpose:
// Cerbos has no way to walk a chain at check time, so an "equivalent" Cerbos policy would need
// the chains resolved beforehand, and the comparison would no longer be like for like.

/** Principals in the graph, by external_ref (E0000…E0999). */
export const PRINCIPALS = Array.from({ length: 1000 }, (_, i) => `E${String(i).padStart(4, "0")}`);
const ROLES = 20;
const CURRENCIES = ["USD", "EUR"] as const;

/** Role r's limit, the same in every currency it holds: r0 highest. */
const roleLimit = (role: number) => 1000 * (ROLES - role);
/** Deterministic membership, so every run and every system sees the same graph. */
const roleOf = (ref: string) => (Number(ref.slice(1)) * 7) % ROLES;

/** One decision request, as each system is asked it. */
export interface PeerCase {
  principal: string;
  action: "reference_noop" | "vendor_payment";
  amount?: number;
  currency?: string;
}

/** True when the policy allows `c`: the oracle. */
export function expected(c: PeerCase): boolean {
  if (c.action === "reference_noop") return true;
  return (CURRENCIES as readonly string[]).includes(c.currency!) && c.amount! <= roleLimit(roleOf(c.principal));
}

/**
 * `perPrincipal` cases for each of `principals` acting principals: one in eight is the starter
 * action, the rest payments below, at and above the principal's limit, and a few in a currency
 * no one may pay in.
 */
export function peerCases(principals: readonly string[], perPrincipal = 8): PeerCase[] {
  const cases: PeerCase[] = [];
  for (const [p, principal] of principals.entries()) {
    const limit = roleLimit(roleOf(principal));
    for (let k = 0; k < perPrincipal; k++) {
      if ((p * perPrincipal + k) % 8 === 0) cases.push({ principal, action: "reference_noop" });
      else {
        const amount = [Math.round(limit * 0.4), limit, limit + 1, Math.round(limit * 1.7), 250][k % 5]!;
        cases.push({ principal, action: "vendor_payment", amount, currency: k % 7 === 6 ? "GBP" : CURRENCIES[k % 2]! });
      }
    }
  }
  return cases;
}

/** `count` acting principals spread over the graph. */
export function actingPrincipals(count: number): string[] {
  return Array.from({ length: count }, (_, i) => PRINCIPALS[(i * 37) % PRINCIPALS.length]!);
}

// --- Mandate: a rules policy with the authority rule, and an authority graph version --------

/** The `payments` policy's rules source (POST /v1/policies). */
export const mandatePolicySource = { rules: { actions: ["vendor_payment"], rules: [{ id: "authority", authority: true }] } };

/** The authority graph (POST /v1/authority-graph/versions): roles, memberships, limits, nothing else. */
export function mandateGraph() {
  return {
    roles: Array.from({ length: ROLES }, (_, r) => ({ role: `r${r}`, reports_to: null })),
    memberships: PRINCIPALS.map((ref) => ({ principal: ref, role: `r${roleOf(ref)}` })),
    limits: Array.from({ length: ROLES }, (_, r) => CURRENCIES.map((currency) => ({ holder: `role:r${r}`, action: "vendor_payment", currency, max_amount: roleLimit(r) }))).flat(),
    delegations: [],
    approval_matrix: [],
  };
}

/** The Intent fields of `c` (the agent acting for c.principal adds agent_id, requested_at and nonce). */
export function intentFields(c: PeerCase): Record<string, unknown> {
  return c.action === "reference_noop" ? { action: c.action } : { action: c.action, amount: c.amount, currency: c.currency };
}

// --- OPA: a Rego module over a data document ----------------------------------------------

/** The query path `opa run --server` answers (POST /v1/data/peers/allow → {"result": bool}). */
export const OPA_PATH = "/v1/data/peers/allow";

export const opaRego = `package peers

default allow := false

allow if input.action == "reference_noop"

allow if {
	input.action == "vendor_payment"
	limit := data.peers_graph.limits[data.peers_graph.members[input.principal]][input.currency]
	input.amount <= limit
}
`;

/** The graph as OPA's data document: principal → role, role → currency → limit. */
export function opaData() {
  return {
    peers_graph: {
      members: Object.fromEntries(PRINCIPALS.map((ref) => [ref, `r${roleOf(ref)}`])),
      limits: Object.fromEntries(Array.from({ length: ROLES }, (_, r) => [`r${r}`, Object.fromEntries(CURRENCIES.map((c) => [c, roleLimit(r)]))])),
    },
  };
}

/** The body OPA is asked `c` with. */
export function opaBody(c: PeerCase): string {
  return JSON.stringify({ input: c });
}

// --- Cerbos: a resource policy whose constants hold the graph -------------------------------

/** The HTTP path of Cerbos's CheckResources. */
export const CERBOS_PATH = "/api/check/resources";

/**
 * A resource policy for kind `intent`. Cerbos learns roles from the caller, but here, as in
 * Mandate and OPA, the graph lives with the policy: the constants map principal → role and
 * role → currency → limit, and the condition looks the principal up (CEL).
 */
export function cerbosPolicy(): string {
  const policy = {
    apiVersion: "api.cerbos.dev/v1",
    resourcePolicy: {
      resource: "intent",
      version: "default",
      constants: { local: opaData().peers_graph },
      rules: [
        { actions: ["reference_noop"], effect: "EFFECT_ALLOW", roles: ["*"] },
        {
          actions: ["vendor_payment"],
          effect: "EFFECT_ALLOW",
          roles: ["*"],
          condition: {
            match: {
              expr: 'P.id in C.members && R.attr.currency in C.limits[C.members[P.id]] && double(R.attr.amount) <= double(C.limits[C.members[P.id]][R.attr.currency])',
            },
          },
        },
      ],
    },
  };
  return JSON.stringify(policy, null, 1); // JSON is YAML
}

/** The body Cerbos is asked `c` with (the role is required by the API and means nothing here). */
export function cerbosBody(c: PeerCase): string {
  const attr = c.action === "reference_noop" ? {} : { amount: c.amount, currency: c.currency };
  return JSON.stringify({
    requestId: "peers",
    principal: { id: c.principal, roles: ["agent"] },
    resources: [{ actions: [c.action], resource: { kind: "intent", id: "intent", attr } }],
  });
}

/** Cerbos's answer for the one action asked: true when EFFECT_ALLOW. */
export function cerbosAllowed(answer: any, action: string): boolean {
  return answer?.results?.[0]?.actions?.[action] === "EFFECT_ALLOW";
}
