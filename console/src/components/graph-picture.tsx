import { Graph, layout } from "@dagrejs/dagre";
import { useId, useMemo } from "react";
import { cellText, type GraphRows } from "../graph-model";

/*
 * The authority graph as a picture: principals and roles as boxes (each with the limits it
 * holds), a principal's membership and a role's place in the hierarchy as solid arrows upwards,
 * delegations as dashed arrows labelled with what they pass on, and under it the approval bands
 * of each action and currency as a strip. Laid out by dagre (a layered layout, computed here in
 * the page) and drawn as plain SVG whose look comes from the stylesheet: no inline style and no
 * script reaches the DOM, so the console's CSP holds. The tables beside it carry the same facts
 * for screen readers.
 */

const CHAR = 7.2;
const LINE = 16;

interface Box {
  id: string;
  kind: "role" | "principal";
  title: string;
  lines: string[];
  width: number;
  height: number;
}

interface Arrow {
  from: string;
  to: string;
  kind: "member" | "reports" | "delegation";
  label: string;
}

const money = (n: number, currency: string) => `${cellText(n)} ${currency}`;
const until = (d: string | null) => (d ? ` until ${d}` : "");

/** Boxes and arrows of a graph: a `role:x` holder is the role's box, any other holder a principal's. */
function model(g: GraphRows, names: ReadonlyMap<string, string>): { boxes: Box[]; arrows: Arrow[] } {
  const boxes = new Map<string, Box>();
  const box = (id: string): Box => {
    let b = boxes.get(id);
    if (!b) {
      const role = id.startsWith("role:");
      const name = role ? undefined : names.get(id);
      b = { id, kind: role ? "role" : "principal", title: role ? id.slice(5) : (name ?? id), lines: name ? [id] : [], width: 0, height: 0 };
      boxes.set(id, b);
    }
    return b;
  };
  const arrows: Arrow[] = [];
  for (const r of g.roles) {
    box(`role:${r.role}`);
    if (r.reports_to) arrows.push({ from: `role:${r.role}`, to: box(`role:${r.reports_to}`).id, kind: "reports", label: "reports to" });
  }
  for (const m of g.memberships) arrows.push({ from: box(m.principal).id, to: box(`role:${m.role}`).id, kind: "member", label: "holds" });
  for (const l of g.limits) box(l.holder).lines.push(`${l.action} ≤ ${money(l.max_amount, l.currency)}${until(l.valid_until)}`);
  for (const d of g.delegations) {
    box(d.holder);
    arrows.push({ from: d.holder, to: box(d.delegate).id, kind: "delegation", label: `delegates ${d.action} ≤ ${money(d.max_amount, d.currency)}${until(d.valid_until)}` });
  }
  for (const b of boxes.values()) {
    const longest = Math.max(b.title.length + 2, ...b.lines.map((l) => l.length));
    b.width = Math.ceil(longest * CHAR) + 24;
    b.height = 22 + LINE * (1 + b.lines.length);
  }
  return { boxes: [...boxes.values()], arrows };
}

interface Band {
  key: string;
  bands: { upTo: number; approvals: number }[];
}

function bandsOf(g: GraphRows): Band[] {
  const by = new Map<string, Band>();
  for (const b of g.approval_matrix) {
    const key = `${b.action} (${b.currency})`;
    if (!by.has(key)) by.set(key, { key, bands: [] });
    by.get(key)!.bands.push({ upTo: b.up_to_amount, approvals: b.approvals_required });
  }
  for (const b of by.values()) b.bands.sort((x, y) => x.upTo - y.upTo);
  return [...by.values()];
}

const BAND_W = 150;
const NO_NAMES: ReadonlyMap<string, string> = new Map();

/** The picture of `graph`, with `label` as its accessible name; `names` maps a principal's external_ref to its display name. */
export function GraphPicture({ graph, label, names = NO_NAMES }: { graph: GraphRows; label: string; names?: ReadonlyMap<string, string> }) {
  const id = useId();
  const laid = useMemo(() => {
    const { boxes, arrows } = model(graph, names);
    const g = new Graph({ multigraph: true });
    g.setGraph({ rankdir: "BT", nodesep: 40, ranksep: 70, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const b of boxes) g.setNode(b.id, { width: b.width, height: b.height });
    arrows.forEach((a, i) => g.setEdge(a.from, a.to, { width: a.label.length * 6.4, height: 14, labelpos: "c" }, `e${i}`));
    layout(g);
    const label = g.graph();
    return {
      boxes: boxes.map((b) => ({ ...b, x: g.node(b.id).x ?? 0, y: g.node(b.id).y ?? 0 })),
      arrows: arrows.map((a, i) => ({ ...a, ...(g.edge(a.from, a.to, `e${i}`) as { points?: { x: number; y: number }[]; x?: number; y?: number }) })),
      width: Math.max(label.width ?? 0, 0),
      height: Math.max(label.height ?? 0, 0),
    };
  }, [graph, names]);
  const bands = bandsOf(graph);
  const stripTop = laid.height + 24;
  const widest = Math.max(laid.width, ...bands.map((b) => 200 + b.bands.length * BAND_W));
  const total = stripTop + bands.length * 48 + (bands.length ? 24 : 0);
  if (laid.boxes.length === 0 && bands.length === 0) return <p className="empty">The graph is empty.</p>;
  return (
    <div className="graph-picture" tabIndex={0} role="group" aria-label={`${label} (scrollable)`}>
      <svg viewBox={`0 0 ${Math.ceil(widest)} ${Math.ceil(total)}`} width={Math.ceil(widest)} height={Math.ceil(total)} role="img" aria-labelledby={`${id}-t`} data-testid="graph-picture">
        <title id={`${id}-t`}>{label}</title>
        <defs>
          {(["member", "reports", "delegation"] as const).map((k) => (
            <marker key={k} id={`${id}-${k}`} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" className={`arrowhead arrow-${k}`}>
              <path d="M0,0 L10,5 L0,10 z" />
            </marker>
          ))}
        </defs>
        {laid.arrows.map((a, i) => (
          <g key={i} className={`edge edge-${a.kind}`} data-edge={`${a.from}→${a.to}`}>
            <path d={(a.points ?? []).map((p, j) => `${j ? "L" : "M"}${p.x},${p.y}`).join(" ")} markerEnd={`url(#${id}-${a.kind})`} />
            {a.x !== undefined && a.y !== undefined && (
              <text x={a.x} y={a.y + 4} textAnchor="middle" className="edge-label">
                {a.label}
              </text>
            )}
          </g>
        ))}
        {laid.boxes.map((b) => (
          <g key={b.id} className={`node node-${b.kind}`} data-node={b.id}>
            <rect x={b.x - b.width / 2} y={b.y - b.height / 2} width={b.width} height={b.height} rx={b.kind === "role" ? 4 : 14} />
            <text x={b.x} y={b.y - b.height / 2 + 20} textAnchor="middle" className="node-title">
              {b.kind === "role" ? `role ${b.title}` : b.title}
            </text>
            {b.lines.map((l, j) => (
              <text key={j} x={b.x} y={b.y - b.height / 2 + 20 + LINE * (j + 1)} textAnchor="middle" className="node-line">
                {l}
              </text>
            ))}
          </g>
        ))}
        {bands.map((band, i) => {
          const y = stripTop + i * 48;
          return (
            <g key={band.key} className="bands" data-bands={band.key}>
              <text x={16} y={y + 22} className="node-title">
                {band.key}
              </text>
              {band.bands.map((b, j) => (
                <g key={j} className={`band band-${Math.min(b.approvals, 2)}`}>
                  <rect x={200 + j * BAND_W} y={y} width={BAND_W - 4} height={34} rx={3} />
                  <text x={200 + j * BAND_W + (BAND_W - 4) / 2} y={y + 15} textAnchor="middle" className="node-line">
                    ≤ {cellText(b.upTo)}
                  </text>
                  <text x={200 + j * BAND_W + (BAND_W - 4) / 2} y={y + 29} textAnchor="middle" className="node-line">
                    {b.approvals === 0 ? "no approval" : b.approvals === 1 ? "1 approval" : `${b.approvals} approvals`}
                  </text>
                </g>
              ))}
            </g>
          );
        })}
      </svg>
    </div>
  );
}
