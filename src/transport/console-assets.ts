import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { answer, refusedMethod, securityHeaders, sendStaticFile, staticFile, type NodeRequest, type NodeResponse, type StaticFile } from "./static-files.js";

/** Where the console is served; its routes and its files live under it. */
export const CONSOLE_PATH = "/console";

/**
 * The console's Content-Security-Policy: nothing inline, nothing from elsewhere. The console
 * is a client of this same origin's API (Connect), so `connect-src 'self'` is all it needs.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/** Types worth compressing (images and fonts are compressed already). */
const COMPRESSIBLE = new Set([".html", ".js", ".mjs", ".css", ".json", ".map", ".svg", ".txt"]);

const SECURITY_HEADERS = securityHeaders(CONSOLE_CSP);

/**
 * Serves the built console (`console/dist`, made by `vite build`) at /console: every file is
 * read into memory once, at start-up, so a request can only ever name a file that was there
 * (no path from a URL reaches the file system: no traversal). Vite's hashed files under
 * `assets/` are immutable for a year; index.html is revalidated every time. An extension-less
 * path under /console is one of the console's routes and gets index.html (the console routes in
 * the browser); a missing file is 404. `GET /` redirects to the console.
 *
 * Returns a handler that answers and returns true for the paths it owns, false otherwise; when
 * `dir` holds no build, /console answers 404 saying how to build it.
 */
export function createConsoleRoute(dir: string): (req: NodeRequest, res: NodeResponse) => boolean {
  const assets = loadAssets(dir);
  const index = assets.get("/index.html");
  return (req, res) => {
    const url = req.url ?? "/";
    const pathname = url.split("?", 1)[0]!;
    if (pathname !== "/" && pathname !== CONSOLE_PATH && !pathname.startsWith(`${CONSOLE_PATH}/`)) return false;
    if (refusedMethod(req, res)) return true;
    if (pathname === "/" || pathname === CONSOLE_PATH) {
      answer(req, res, 302, { location: `${CONSOLE_PATH}/`, "cache-control": "no-cache" }, "");
      return true;
    }
    if (!index) {
      answer(req, res, 404, { "content-type": "text/plain; charset=utf-8" }, "The console is not built: run `npm run build:console`.\n");
      return true;
    }
    let relative: string;
    try {
      relative = decodeURIComponent(pathname.slice(CONSOLE_PATH.length));
    } catch {
      relative = "\0";
    }
    const file = relative === "/" ? index : assets.get(relative);
    // A route of the single-page app: no extension in its last segment.
    const isRoute = !file && !path.posix.extname(relative) && !relative.startsWith("/assets/") && !relative.includes("\0");
    const asset = file ?? (isRoute ? index : undefined);
    if (!asset) answer(req, res, 404, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-cache", ...SECURITY_HEADERS }, "Not found.\n");
    else sendStaticFile(req, res, asset, SECURITY_HEADERS);
    return true;
  };
}

/** Every file under `dir`, keyed by its URL path below /console ("/index.html", "/assets/x-1a2b.js"). */
function loadAssets(dir: string): Map<string, StaticFile> {
  const assets = new Map<string, StaticFile>();
  const walk = (at: string) => {
    let names: string[];
    try {
      names = readdirSync(at);
    } catch {
      return;
    }
    for (const name of names) {
      const full = path.join(at, name);
      if (statSync(full).isDirectory()) {
        walk(full);
        continue;
      }
      const key = "/" + path.relative(dir, full).split(path.sep).join("/");
      const ext = path.extname(name).toLowerCase();
      const body = readFileSync(full);
      assets.set(
        key,
        staticFile(
          body,
          TYPES[ext] ?? "application/octet-stream",
          // Vite puts a content hash in every name under assets/: such a name never changes content.
          key.startsWith("/assets/") ? "public, max-age=31536000, immutable" : "no-cache",
          COMPRESSIBLE.has(ext) && body.length > 1024,
        ),
      );
    }
  };
  walk(dir);
  return assets;
}
