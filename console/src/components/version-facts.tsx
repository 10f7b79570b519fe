import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { formatTime, isoTime } from "../format";
import { Link } from "./link";
import { ScrollTable } from "./scroll-table";

/** What a policy version and a graph version both say of who made them and when. */
export interface VersionFacts {
  author: string;
  approver: string;
  createdAt?: Timestamp;
  publishedAt?: Timestamp;
}

function When({ ts }: { ts?: Timestamp }) {
  return ts ? <time dateTime={isoTime(ts)}>{formatTime(ts)}</time> : <>—</>;
}

/** One row of a versions table: the version, its state's name, where its page is, and its facts. */
export interface VersionRow extends VersionFacts {
  version: number;
  state: string;
  href: string;
}

/** A policy's or the authority graph's versions, in the order given, each linked to its page. */
export function VersionsTable({ label, testId, rows }: { label: string; testId: string; rows: VersionRow[] }) {
  return (
    <ScrollTable label={label} testId={testId} columns={["Version", "State", "Author", "Approver", "Created", "Published"]}>
      <tbody>
        {rows.map((v) => (
          <tr key={v.version} data-version={v.version}>
            <th scope="row">
              <Link to={v.href}>Version {v.version}</Link>
            </th>
            <td>
              <span className={`state state-${v.state}`}>{v.state}</span>
            </td>
            <td>
              <code>{v.author || "—"}</code>
            </td>
            <td>
              <code>{v.approver || "—"}</code>
            </td>
            <td>
              <When ts={v.createdAt} />
            </td>
            <td>
              <When ts={v.publishedAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </ScrollTable>
  );
}

/** The same facts as term and description pairs, for a version's own page. */
export function VersionFactItems({ v, approverTestId }: { v: VersionFacts; approverTestId: string }) {
  return (
    <>
      <dt>Author</dt>
      <dd>
        <code>{v.author || "—"}</code>
      </dd>
      <dt>Approver</dt>
      <dd>
        <code data-testid={approverTestId}>{v.approver || "—"}</code>
      </dd>
      <dt>Created</dt>
      <dd>
        <When ts={v.createdAt} />
      </dd>
      <dt>Published</dt>
      <dd>
        <When ts={v.publishedAt} />
      </dd>
    </>
  );
}
