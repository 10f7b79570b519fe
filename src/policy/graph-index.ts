import type { ApprovalBand, AuthorityGraph } from "./graph-types.js";

/**
 * One way a holder can act: up to `max_amount`, until the end of `valid_until` (UTC date,
 * null for no end), along `via`, the holders the authority passed through (origin first,
 * the holder last).
 */
export interface Grant {
  max_amount: number;
  valid_until: string | null;
  via: string[];
}

/** The graph as the Rego library reads it (data.mandate.graph_index), built once per bundle so evaluation is keyed lookups. */
export interface GraphIndex {
  version: number | null;
  /** principal external_ref → action → currency → grants, by max_amount descending. */
  authority: Record<string, Record<string, Record<string, Grant[]>>>;
  /** action → currency → bands, by up_to_amount ascending. */
  bands: Record<string, Record<string, Pick<ApprovalBand, "up_to_amount" | "approvals_required">[]>>;
}

/** Builds the index the Rego library evaluates against; expects a graph that validateGraph accepted. */
export function indexGraph(graph: AuthorityGraph, version: number | null): GraphIndex {
  const holdings = computeHoldings(graph);
  const authority = new Map<string, Map<string, Map<string, Grant[]>>>();
  for (const [holder, byPair] of holdings) {
    if (holder.startsWith(ROLE_PREFIX)) continue;
    for (const [pair, grants] of byPair) {
      const [action, currency] = splitPair(pair);
      nested(nested(authority, holder), action).set(currency, grants);
    }
  }
  const bands = new Map<string, Map<string, GraphIndex["bands"][string][string]>>();
  for (const band of graph.approval_matrix) {
    const list = nested(bands, band.action).get(band.currency) ?? [];
    list.push({ up_to_amount: band.up_to_amount, approvals_required: band.approvals_required });
    nested(bands, band.action).set(band.currency, list);
  }
  for (const byCurrency of bands.values()) {
    for (const list of byCurrency.values()) list.sort((a, b) => a.up_to_amount - b.up_to_amount);
  }
  return { version, authority: toSortedObject(authority), bands: toSortedObject(bands) };
}

/** Prefix that marks a role among holders (`role:cfo`); anything else is a principal's external_ref. */
export const ROLE_PREFIX = "role:";

/**
 * Computes, for every holder (principal ref or `role:<name>`) and every (action, currency),
 * the Pareto frontier of its grants ignoring time: no grant in it is matched or beaten by
 * another on both amount and expiry. Evaluation then needs only the live grant with the
 * largest amount.
 *
 * Authority flows along three kinds of edge: a role to the role it reports to (the higher
 * role inherits it), a role to its members, and a delegation from holder to delegate, which
 * caps the amount at the delegation's max_amount and the expiry at its valid_until. Because
 * min distributes over max, "the delegate gets min(delegated, what the holder holds at that
 * moment)" equals the best over all chains of (smallest amount, earliest expiry) along the
 * chain, which is what the frontier keeps. Chains never revisit a holder: a cycle can only
 * lower a value.
 */
export function computeHoldings(graph: AuthorityGraph): Map<string, Map<string, Grant[]>> {
  const holdings = new Map<string, Map<string, Grant[]>>();
  const flows = new Map<string, string[]>();
  const addFlow = (from: string, to: string): void => void (flows.get(from) ?? flows.set(from, []).get(from)!).push(to);
  for (const role of graph.roles) {
    if (role.reports_to) addFlow(ROLE_PREFIX + role.role, ROLE_PREFIX + role.reports_to);
  }
  for (const m of graph.memberships) addFlow(ROLE_PREFIX + m.role, m.principal);
  const delegationsByHolder = new Map<string, AuthorityGraph["delegations"]>();
  for (const d of graph.delegations) {
    (delegationsByHolder.get(d.holder) ?? delegationsByHolder.set(d.holder, []).get(d.holder)!).push(d);
  }

  const queue: string[] = [];
  const queued = new Set<string>();
  const offer = (holder: string, pair: string, grant: Grant): void => {
    const byPair = holdings.get(holder) ?? holdings.set(holder, new Map()).get(holder)!;
    const frontier = byPair.get(pair) ?? [];
    const next = insertGrant(frontier, grant);
    if (next === frontier) return;
    byPair.set(pair, next);
    if (!queued.has(holder)) {
      queued.add(holder);
      queue.push(holder);
    }
  };

  for (const limit of graph.limits) {
    offer(limit.holder, pairKey(limit.action, limit.currency), {
      max_amount: limit.max_amount,
      valid_until: limit.valid_until ?? null,
      via: [limit.holder],
    });
  }
  // A holder is queued whenever its grants change, and passes them all on again.
  for (let i = 0; i < queue.length; i++) {
    const holder = queue[i]!;
    queued.delete(holder);
    const byPair = holdings.get(holder);
    if (!byPair) continue;
    for (const [pair, frontier] of byPair) {
      for (const grant of frontier) {
        for (const to of flows.get(holder) ?? []) {
          if (!grant.via.includes(to)) offer(to, pair, { ...grant, via: [...grant.via, to] });
        }
      }
    }
    for (const d of delegationsByHolder.get(holder) ?? []) {
      const pair = pairKey(d.action, d.currency);
      for (const grant of byPair.get(pair) ?? []) {
        if (grant.via.includes(d.delegate)) continue;
        offer(d.delegate, pair, {
          max_amount: Math.min(grant.max_amount, d.max_amount),
          valid_until: earlier(grant.valid_until, d.valid_until),
          via: [...grant.via, d.delegate],
        });
      }
    }
  }
  return holdings;
}

/** The largest amount a holder can ever act on for (action, currency), ignoring expiry; 0 when none. */
export function maxHolding(holdings: Map<string, Map<string, Grant[]>>, holder: string, action: string, currency: string): number {
  return holdings.get(holder)?.get(pairKey(action, currency))?.[0]?.max_amount ?? 0;
}

/** Returns a new frontier with the grant added, or the same array when the grant adds nothing. */
function insertGrant(frontier: Grant[], grant: Grant): Grant[] {
  for (const existing of frontier) {
    const cmpAmount = existing.max_amount - grant.max_amount;
    const cmpExpiry = compareExpiry(existing.valid_until, grant.valid_until);
    if (cmpAmount >= 0 && cmpExpiry >= 0) {
      // Equal on both counts: keep the shorter (then lexicographically smaller) chain, so
      // the index does not depend on the order edges are explored in.
      if (cmpAmount === 0 && cmpExpiry === 0 && compareVia(grant.via, existing.via) < 0) break;
      return frontier;
    }
  }
  const kept = frontier.filter(
    (e) => !(grant.max_amount >= e.max_amount && compareExpiry(grant.valid_until, e.valid_until) >= 0),
  );
  kept.push(grant);
  // Amounts descending; on a frontier that also means expiries ascending.
  return kept.sort((a, b) => b.max_amount - a.max_amount);
}

/** Orders expiries with "never" last; ISO dates compare as strings. */
function compareExpiry(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

function earlier(a: string | null, b: string | null): string | null {
  return compareExpiry(a, b) <= 0 ? a : b;
}

function compareVia(a: string[], b: string[]): number {
  if (a.length !== b.length) return a.length - b.length;
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) return (a[i] as string) < (b[i] as string) ? -1 : 1;
  }
  return 0;
}

// Actions never contain a NUL, so it separates the two halves of a key unambiguously.
function pairKey(action: string, currency: string): string {
  return `${action}\u0000${currency}`;
}

function splitPair(pair: string): [string, string] {
  const at = pair.indexOf("\u0000");
  return [pair.slice(0, at), pair.slice(at + 1)];
}

function nested<V>(map: Map<string, Map<string, V>>, key: string): Map<string, V> {
  return map.get(key) ?? map.set(key, new Map()).get(key)!;
}

type Nested<V> = Map<string, V | Nested<V>>;

// Sorted keys make the JSON, and so the bundle digest, a function of the graph alone;
// Object.fromEntries defines own properties, so a ref such as "__proto__" stays data.
function toSortedObject<T>(map: Nested<unknown>): T {
  const entries = [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([k, v]) => [k, v instanceof Map ? toSortedObject(v as Nested<unknown>) : v])) as T;
}
