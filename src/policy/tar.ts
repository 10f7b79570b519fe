import { gunzipSync } from "node:zlib";

const BLOCK = 512;
// A bundle holds a policy and its data; anything bigger than this is not one of ours.
const MAX_UNPACKED_BYTES = 512 * 1024 * 1024;

/**
 * Reads the regular files of a .tar.gz (ustar, with PAX and GNU long names), keyed by path
 * without a leading "/" or "./". Enough for the bundles opa build writes, with no
 * dependency; throws on a corrupt archive rather than returning part of it.
 */
export function readTarGz(archive: Uint8Array): Map<string, Buffer> {
  const tar = gunzipSync(archive, { maxOutputLength: MAX_UNPACKED_BYTES });
  const files = new Map<string, Buffer>();
  let offset = 0;
  let longName: string | undefined;
  while (offset + BLOCK <= tar.length) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) break;
    if (checksum(header) !== octal(header, 148, 8)) throw new Error(`corrupt tar header at byte ${offset}`);
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156] ?? 0);
    const bodyStart = offset + BLOCK;
    const body = tar.subarray(bodyStart, bodyStart + size);
    if (body.length !== size) throw new Error("truncated tar archive");
    offset = bodyStart + Math.ceil(size / BLOCK) * BLOCK;

    if (type === "x") {
      longName = paxPath(body) ?? longName;
    } else if (type === "L") {
      longName = cString(body, 0, body.length);
    } else {
      if (type === "0" || type === "\0") {
        const prefix = cString(header, 345, 155);
        const name = longName ?? (prefix ? `${prefix}/${cString(header, 0, 100)}` : cString(header, 0, 100));
        files.set(name.replace(/^\.?\/+/, ""), Buffer.from(body));
      }
      longName = undefined;
    }
  }
  return files;
}

function cString(bytes: Uint8Array, start: number, length: number): string {
  const slice = bytes.subarray(start, start + length);
  const end = slice.indexOf(0);
  return Buffer.from(end === -1 ? slice : slice.subarray(0, end)).toString("utf8");
}

function octal(bytes: Uint8Array, start: number, length: number): number {
  const text = cString(bytes, start, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new Error("corrupt tar header: a numeric field is not octal");
  return text === "" ? 0 : parseInt(text, 8);
}

// The header checksum: the sum of all header bytes with the checksum field read as spaces.
function checksum(header: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] as number);
  return sum;
}

// PAX records are "<length> <key>=<value>\n"; only the path matters here.
function paxPath(body: Uint8Array): string | undefined {
  const text = Buffer.from(body).toString("utf8");
  let path: string | undefined;
  for (const match of text.matchAll(/^\d+ ([^=]+)=(.*)$/gm)) {
    if (match[1] === "path") path = match[2];
  }
  return path;
}
