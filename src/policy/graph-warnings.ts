import type { AuthorityGraph, Delegation, GovernanceDocument, GovernanceWarning, Limit } from "./graph-types.js";

/** Where a graph entry came from: its document, its row's file line, and where a field of the row is. */
export interface Origin {
  document_id: string;
  line: number;
  at: (field: string) => { line: number; column?: number };
}

/**
 * What generation accepts but an author should look at, in document order:
 * - `delegation_cycle`: delegations of one action and currency that lead back to where they
 *   started. Harmless to evaluation (a chain never revisits a holder) but never what a
 *   delegation of authority means to say.
 * - `shadowed_row`: a row that can never decide anything because another covers it: a limit
 *   or delegation another row of the same holder (and delegate) matches or beats on both
 *   amount and expiry, an approval band written after a larger band of its action and
 *   currency, a membership stated twice.
 */
export function findWarnings(
  graph: AuthorityGraph,
  origin: Record<keyof AuthorityGraph, Origin[]>,
  docs: readonly Pick<GovernanceDocument, "document_id" | "name">[],
): GovernanceWarning[] {
  const warnings: GovernanceWarning[] = [];
  const ids = docs.map((d) => d.document_id);
  const cite = (o: Origin): string => `${docs[ids.indexOf(o.document_id)]?.name ?? o.document_id} line ${o.line}`;
  const warn = (code: GovernanceWarning["code"], o: Origin, message: string): void =>
    void warnings.push({ code, message, document_id: o.document_id, line: o.line });

  // Limits and delegations: superseded by another row of the same grant.
  const superseded = <T extends Limit | Delegation>(entries: T[], origins: Origin[], key: (e: T) => string, what: (e: T) => string): void => {
    const groups = new Map<string, number[]>();
    entries.forEach((e, i) => void (groups.get(key(e)) ?? groups.set(key(e), []).get(key(e))!).push(i));
    for (const members of groups.values()) {
      for (const i of members) {
        // The first row that covers this one; of two identical rows the later is the redundant one.
        const by = members.find((j) => j !== i && covers(entries[j]!, entries[i]!) && (!covers(entries[i]!, entries[j]!) || j < i));
        if (by === undefined) continue;
        const e = entries[i]!;
        const b = entries[by]!;
        warn(
          "shadowed_row",
          origins[i]!,
          `${what(e)} of ${e.max_amount} ${e.currency} ${until(e)} never applies: ${cite(origins[by]!)} grants ${b.max_amount} ${b.currency} ${until(b)}`,
        );
      }
    }
  };
  superseded(graph.limits, origin.limits, (l) => JSON.stringify([l.holder, l.action, l.currency]), (l) => `the limit of ${l.holder} for ${l.action}`);
  superseded(
    graph.delegations,
    origin.delegations,
    (d) => JSON.stringify([d.holder, d.delegate, d.action, d.currency]),
    (d) => `the delegation from ${d.holder} to ${d.delegate} for ${d.action}`,
  );

  // Approval bands apply in ascending order of up_to_amount, whatever order they are written in.
  const largest = new Map<string, number>();
  graph.approval_matrix.forEach((band, i) => {
    const key = JSON.stringify([band.action, band.currency]);
    const before = largest.get(key);
    const earlier = before === undefined ? undefined : graph.approval_matrix[before]!;
    if (earlier && earlier.up_to_amount > band.up_to_amount) {
      warn(
        "shadowed_row",
        origin.approval_matrix[i]!,
        `the band up to ${band.up_to_amount} ${band.currency} for ${band.action} comes after the band up to ${earlier.up_to_amount} on ${cite(origin.approval_matrix[before!]!)}, which covers it when the matrix is read top to bottom; bands apply in ascending order of up_to_amount`,
      );
      return;
    }
    largest.set(key, i);
  });

  const memberships = new Map<string, number>();
  graph.memberships.forEach((m, i) => {
    const key = JSON.stringify([m.principal, m.role]);
    const first = memberships.get(key);
    if (first === undefined) return void memberships.set(key, i);
    warn("shadowed_row", origin.memberships[i]!, `${m.principal} already holds role "${m.role}" (${cite(origin.memberships[first]!)})`);
  });

  for (const cycle of delegationCycles(graph.delegations)) {
    const d = graph.delegations[cycle.closing]!;
    warn("delegation_cycle", origin.delegations[cycle.closing]!, `delegations of ${d.action} in ${d.currency} form a cycle: ${cycle.holders.join(" → ")}`);
  }
  return warnings.sort((a, b) => ids.indexOf(a.document_id) - ids.indexOf(b.document_id) || (a.line ?? 0) - (b.line ?? 0));
}

// Whether grant a is at least grant b on both amount and expiry (null: no end).
function covers(a: Limit | Delegation, b: Limit | Delegation): boolean {
  const expiry = a.valid_until === null || (b.valid_until !== null && a.valid_until >= b.valid_until);
  return a.max_amount >= b.max_amount && expiry;
}

function until(g: Limit | Delegation): string {
  return g.valid_until === null ? "with no end" : `until ${g.valid_until}`;
}

/**
 * Cycles among delegations of one action and currency, each found as a back edge of a
 * depth-first search (every cycle holds at least one) and reported at that delegation, with
 * the holders around it. Only delegations can close a cycle: authority otherwise flows from a
 * role up to the roles above it (role cycles are errors) and down to members, never from a
 * principal back into a role.
 */
function delegationCycles(delegations: readonly Delegation[]): { closing: number; holders: string[] }[] {
  const byPair = new Map<string, number[]>();
  delegations.forEach((d, i) => {
    const key = JSON.stringify([d.action, d.currency]);
    (byPair.get(key) ?? byPair.set(key, []).get(key)!).push(i);
  });
  const cycles: { closing: number; holders: string[] }[] = [];
  for (const members of byPair.values()) {
    const out = new Map<string, number[]>();
    for (const i of members) {
      const holder = delegations[i]!.holder;
      (out.get(holder) ?? out.set(holder, []).get(holder)!).push(i);
    }
    const done = new Set<string>();
    for (const start of out.keys()) {
      if (done.has(start)) continue;
      // An explicit stack (a chain of delegations may be long): each frame is a holder and the next of its edges to follow.
      const stack: { holder: string; next: number }[] = [{ holder: start, next: 0 }];
      const onStack = new Map<string, number>([[start, 0]]);
      while (stack.length > 0) {
        const frame = stack[stack.length - 1]!;
        const edges = out.get(frame.holder) ?? [];
        if (frame.next === edges.length) {
          stack.pop();
          onStack.delete(frame.holder);
          done.add(frame.holder);
          continue;
        }
        const edge = edges[frame.next++]!;
        const to = delegations[edge]!.delegate;
        const depth = onStack.get(to);
        if (depth !== undefined) {
          cycles.push({ closing: edge, holders: [...stack.slice(depth).map((f) => f.holder), to] });
        } else if (!done.has(to)) {
          onStack.set(to, stack.length);
          stack.push({ holder: to, next: 0 });
        }
      }
    }
  }
  return cycles;
}
