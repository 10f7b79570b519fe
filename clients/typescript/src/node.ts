import { chmod, readFile, writeFile } from "node:fs/promises";
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

/** Writes the private key to a new file readable by its owner only (0600); never overwrites unless told. */
export async function saveKey(key: AgentKey, path: string, options: { overwrite?: boolean } = {}): Promise<void> {
  await writeFile(path, key.toPem(), { mode: 0o600, flag: options.overwrite ? "w" : "wx" });
  // `mode` applies only when the file is created: an overwritten file is narrowed here.
  if (options.overwrite) await chmod(path, 0o600);
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
