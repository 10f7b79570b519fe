import { randomBytes } from "node:crypto";
import { link, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { AgentKey } from "./keys.js";

/*
 * `@mandate/client/node`: an agent's key as a file, for Node only (the main entry stays
 * browser-safe). A key file is PKCS#8 PEM with 0600 permissions, the file the Python client
 * writes and OpenSSL reads, so one file means one agent identity whichever client uses it.
 */

/** Reads a key saved by `saveKey` (PKCS#8 PEM, also what `openssl genpkey -algorithm ed25519` writes). */
export async function loadKey(path: string): Promise<AgentKey> {
  return AgentKey.fromPem(await readFile(path, "utf8"));
}

/**
 * Writes the private key to a file readable by its owner only (0600); never overwrites unless
 * told. The key is written whole to a new file beside `path` first, then put in place at once
 * (`link` refuses an existing file, `rename` replaces it), so no reader, another process running
 * loadOrCreateKey included, ever sees a half-written key.
 */
export async function saveKey(key: AgentKey, path: string, options: { overwrite?: boolean } = {}): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const file = await open(temp, "wx", 0o600);
  try {
    await file.writeFile(key.toPem());
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    if (options.overwrite) await rename(temp, path);
    else await link(temp, path);
  } finally {
    if (!options.overwrite) await unlink(temp);
  }
}

/** Loads the key at `path`, or generates and saves one there: the same file always means the same agent. */
export async function loadOrCreateKey(path: string): Promise<AgentKey> {
  try {
    return await loadKey(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const key = await AgentKey.generate();
  try {
    await saveKey(key, path);
    return key;
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return loadKey(path);
    throw err;
  }
}
