import { useId, useMemo } from "react";
import { GraphVersionState, type AuthorityGraph } from "../../../src/gen/mandate/v1/authority_graph_pb.js";
import { useActiveGraph, useApproveGraphVersion, useGraphPrincipals, useGraphVersion, usePublishGraphVersion } from "../api/governance";
import { useCan, useIdentity } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { GraphPicture } from "../components/graph-picture";
import { Link } from "../components/link";
import { VersionFactItems } from "../components/version-facts";
import { cellText, diffGraphs, readGraph, SECTIONS, type GraphRows } from "../graph-model";
import { GRAPH_STATE } from "./governance";
import { ScrollTable } from "../components/scroll-table";
import "../authoring.css";

/** /governance/versions/:version: one graph version as a picture and as tables, its difference from the active one, approve and publish. */
export function GraphVersionPage({ version }: { version: number }) {
  const id = useId();
  const v = useGraphVersion(version);
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/governance">← Governance</Link>
      </p>
      <h1 id={`${id}-h`}>Authority graph version {version}</h1>
      {v.isPending ? <Loading what="the version" /> : v.error ? <ApiError error={v.error} title="The version could not be read" /> : <VersionView v={v.data} />}
    </main>
  );
}

function VersionView({ v }: { v: AuthorityGraph }) {
  const graph = useMemo(() => readGraph(v.graph), [v.graph]);
  const principals = useGraphPrincipals();
  const names = useMemo(() => new Map((principals.data?.principals ?? []).map((p) => [p.externalRef, p.displayName])), [principals.data]);
  return (
    <>
      <section className="card" aria-label="Version">
        <dl className="facts">
          <dt>State</dt>
          <dd>
            <span className={`state state-${GRAPH_STATE[v.state]}`} data-testid="graph-state">
              {GRAPH_STATE[v.state]}
            </span>
          </dd>
          <VersionFactItems v={v} approverTestId="graph-approver" />
        </dl>
        <Lifecycle v={v} />
      </section>
      <section className="card" aria-labelledby="graph-picture-h">
        <h2 id="graph-picture-h" className="h3">
          Picture
        </h2>
        <p className="muted small">
          Boxes are roles (square) and principals (round) with the limits they hold; solid arrows lead from a principal to its role and from a role to the role
          it reports to; dashed arrows are delegations; the strips below are the approval bands.
        </p>
        <GraphPicture graph={graph} names={names} label={`Authority graph version ${v.version}`} />
      </section>
      <Diff v={v} graph={graph} />
      <Tables graph={graph} />
    </>
  );
}

function Lifecycle({ v }: { v: AuthorityGraph }) {
  const canApprove = useCan("POLICY_APPROVER");
  const identity = useIdentity();
  const approve = useApproveGraphVersion();
  const publish = usePublishGraphVersion();
  if (!canApprove) return <p className="muted small">Approving and publishing need POLICY_APPROVER, which this key lacks.</p>;
  const own = identity !== undefined && identity === v.author;
  return (
    <div className="lifecycle">
      {v.state === GraphVersionState.DRAFT && (
        <>
          <div className="actions">
            <button
              type="button"
              disabled={approve.isPending || own}
              aria-describedby={own ? "graph-own" : undefined}
              onClick={() => approve.mutate({ version: v.version })}
            >
              Approve
            </button>
          </div>
          {own && (
            <p id="graph-own" className="muted small" data-testid="approve-reason">
              This key authored the version: four eyes require another identity holding POLICY_APPROVER to approve it.
            </p>
          )}
        </>
      )}
      {v.state === GraphVersionState.APPROVED && (
        <div className="actions">
          <button type="button" disabled={publish.isPending} onClick={() => publish.mutate({ version: v.version })}>
            Publish
          </button>
        </div>
      )}
      {v.state === GraphVersionState.ACTIVE && <p className="ok">Active: the organization&apos;s decisions are evaluated against this version.</p>}
      <ApiError error={approve.error} title="Approval was refused" />
      <ApiError error={publish.error} title="Publishing was refused" />
      {/* Once published, "it can now be published" would be stale. */}
      {approve.isSuccess && v.state === GraphVersionState.APPROVED && <p role="status">Approved; it can now be published.</p>}
      {publish.isSuccess && <p role="status">Published: this version is now active.</p>}
    </div>
  );
}

function RowsTable({ caption, columns, rows, testId }: { caption: string; columns: readonly string[]; rows: Record<string, unknown>[]; testId?: string }) {
  return (
    <ScrollTable label={caption} testId={testId} caption={caption} columns={columns}>
      <tbody>
        {rows.map((r, i) => (
          <tr key={i}>
            {columns.map((c) => (
              <td key={c}>{cellText(r[c])}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </ScrollTable>
  );
}

function Tables({ graph }: { graph: GraphRows }) {
  return (
    <section className="card" aria-labelledby="graph-tables-h">
      <h2 id="graph-tables-h" className="h3">
        Tables
      </h2>
      {SECTIONS.map((s) => {
        const rows = graph[s.key] as unknown as Record<string, unknown>[];
        return rows.length === 0 ? (
          <p key={s.key} className="muted small">
            {s.title}: none.
          </p>
        ) : (
          <RowsTable key={s.key} caption={`${s.title} (${rows.length})`} columns={s.columns} rows={rows} testId={`table-${s.key}`} />
        );
      })}
    </section>
  );
}

function Diff({ v, graph }: { v: AuthorityGraph; graph: GraphRows }) {
  const active = useActiveGraph();
  if (v.state === GraphVersionState.ACTIVE) return null;
  return (
    <section className="card" aria-labelledby="graph-diff-h" data-testid="graph-diff">
      <h2 id="graph-diff-h" className="h3">
        Compared with the active version
      </h2>
      {active.isPending ? (
        <Loading what="the active version" />
      ) : active.error ? (
        <ApiError error={active.error} title="The active graph could not be read" />
      ) : (
        <DiffTables activeVersion={active.data.version} base={readGraph(active.data.graph)} graph={graph} />
      )}
    </section>
  );
}

function DiffTables({ activeVersion, base, graph }: { activeVersion: number; base: GraphRows; graph: GraphRows }) {
  const diff = diffGraphs(base, graph);
  const changed = SECTIONS.filter((s) => diff[s.key].added.length + diff[s.key].removed.length > 0);
  return (
    <>
      <p data-testid="diff-summary">
        {activeVersion === 0 ? "No version is active yet: every row below is new (" : `Against version ${activeVersion}: `}
        {changed.length === 0
          ? "no difference"
          : changed.map((s) => `${s.title.toLowerCase()} +${diff[s.key].added.length} −${diff[s.key].removed.length}`).join("; ")}
        {activeVersion === 0 ? ")." : "."}
      </p>
      {activeVersion > 0 && changed.map((s) => (
        <div key={s.key} className="diff">
          {diff[s.key].added.length > 0 && <RowsTable caption={`${s.title}: added`} columns={s.columns} rows={diff[s.key].added} />}
          {diff[s.key].removed.length > 0 && <RowsTable caption={`${s.title}: removed`} columns={s.columns} rows={diff[s.key].removed} />}
        </div>
      ))}
    </>
  );
}
