import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { answer, refusedMethod, securityHeaders, sendStaticFile, staticFile, type NodeRequest, type NodeResponse, type StaticFile } from "./static-files.js";

/** Where the API reference is served. */
export const DOCS_PATH = "/docs";

/**
 * The reference page's Content-Security-Policy: the console's (transport/console-assets.ts, no
 * inline script, nothing from elsewhere) with the two things Redoc's standalone bundle needs:
 * inline styles (styled-components writes <style> elements at run time) and a worker from a
 * blob: URL (its search index). Scripts still come only from this origin.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "worker-src blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS = securityHeaders(DOCS_CSP);

/**
 * The page: Redoc's standalone bundle renders any `<redoc spec-url>` element it finds when it
 * loads, so the page needs no script of its own (none inline, as the CSP requires).
 */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mandate API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<redoc spec-url="/openapi.json" hide-hostname="true" expand-responses="200" required-props-first="true"></redoc>
<script src="${DOCS_PATH}/redoc.standalone.js"></script>
</body>
</html>
`;

/**
 * Serves the API reference at /docs: a page that loads Redoc's standalone bundle (from the
 * `redoc` npm package, read once at start-up; no CDN) pointed at /openapi.json. The bundle's URL
 * does not change when Redoc is upgraded, so it is revalidated rather than cached for good.
 *
 * Returns a handler that answers and returns true for the paths it owns, false otherwise.
 */
export function createDocsRoute(): (req: NodeRequest, res: NodeResponse) => boolean {
  const bundle = readFileSync(createRequire(import.meta.url).resolve("redoc/bundles/redoc.standalone.js"));
  const files = new Map<string, StaticFile>([
    [DOCS_PATH, staticFile(PAGE, "text/html; charset=utf-8", "no-cache")],
    [`${DOCS_PATH}/redoc.standalone.js`, staticFile(bundle, "text/javascript; charset=utf-8", "public, max-age=3600")],
  ]);
  return (req, res) => {
    const pathname = (req.url ?? "/").split("?", 1)[0]!;
    if (pathname !== DOCS_PATH && !pathname.startsWith(`${DOCS_PATH}/`)) return false;
    if (pathname === `${DOCS_PATH}/`) {
      res.writeHead(308, { location: DOCS_PATH });
      res.end();
      return true;
    }
    if (refusedMethod(req, res)) return true;
    const found = files.get(pathname);
    if (!found) answer(req, res, 404, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-cache" }, "Not found.\n");
    else sendStaticFile(req, res, found, SECURITY_HEADERS);
    return true;
  };
}
