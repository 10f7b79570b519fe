import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { formatTime, isoTime } from "../format";

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

/** The author, approver, created and published cells of a version's table row. */
export function VersionCells({ v }: { v: VersionFacts }) {
  return (
    <>
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
    </>
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
