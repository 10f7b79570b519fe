import { lookup } from "node:dns";
import { BlockList, isIP } from "node:net";
import type { LookupFunction } from "node:net";
import type { FieldError } from "../base/errors.js";

/*
 * Where a webhook may point (docs/webhooks.md, Targets). Any http(s) URL; in production, not an
 * address of the service's own host or network (loopback, private, link-local, carrier-grade NAT,
 * multicast, reserved, and their IPv6 counterparts), since a customer's URL would otherwise let
 * them make the service call its neighbours. The host is resolved when the webhook is created and
 * again by every attempt (through the connection's own lookup, so the address checked is the
 * address connected to: a name that later resolves elsewhere is refused then).
 */

const INTERNAL = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) INTERNAL.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) INTERNAL.addSubnet(net, prefix, "ipv6");

/** The IPv4 address an IPv6 address carries (IPv4-mapped, IPv4-compatible or NAT64), if it does. */
function embeddedIPv4(ipv6: string): string | null {
  const lower = ipv6.toLowerCase();
  const m = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (m) return m[1]!;
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/** Whether `address` (an IP literal) is one a production webhook may not reach. */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return INTERNAL.check(address, "ipv4");
  if (family === 6) {
    const v4 = embeddedIPv4(address);
    if (v4 !== null) return INTERNAL.check(v4, "ipv4");
    return INTERNAL.check(address, "ipv6");
  }
  return true;
}

/** A URL's host as an IP literal (brackets removed) when it is one. */
function literalHost(url: URL): string | null {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return isIP(host) ? host : null;
}

/** The URL, or the field error that refuses it (format only: no resolution). */
export function parseWebhookUrl(raw: string): URL | FieldError {
  const bad = (message: string): FieldError => ({ field: "url", code: "invalid_format", message });
  if (raw.length === 0) return { field: "url", code: "required", message: "an http(s) URL is required" };
  if (raw.length > 2048) return bad("at most 2048 characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad("not a URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return bad("must be an http or https URL");
  // Credentials in a URL would be shown by every listing.
  if (url.username !== "" || url.password !== "") return bad("must not carry a user name or password");
  if (url.hostname === "") return bad("must name a host");
  // The URL is stored as parsed (percent-encoded, host in ASCII), which may be longer than given.
  if (url.toString().length > 2048) return bad("at most 2048 characters once percent-encoded");
  return url;
}

/** How long creating a webhook waits for its host to resolve: the request must not hang on a slow resolver. */
const RESOLVE_TIMEOUT_MS = 5_000;

/** Resolves `host` to every address it has (an IP literal resolves to itself); rejects past RESOLVE_TIMEOUT_MS. */
function resolveAll(host: string): Promise<string[]> {
  if (isIP(host)) return Promise.resolve([host]);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timeout")), RESOLVE_TIMEOUT_MS);
    lookup(host, { all: true }, (err, addresses) => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(addresses.map((a) => a.address));
    });
  });
}

/**
 * Null when `url` may be a target now, else why not: when `refuseInternal`, every address its host
 * resolves to must be public (a name that does not resolve is refused too: it could not be checked).
 */
export async function targetProblem(url: URL, refuseInternal: boolean): Promise<string | null> {
  if (!refuseInternal) return null;
  const literal = literalHost(url);
  let addresses: string[];
  try {
    addresses = literal ? [literal] : await resolveAll(url.hostname);
  } catch {
    return `the host ${url.hostname} does not resolve (within ${RESOLVE_TIMEOUT_MS / 1000} s)`;
  }
  const internal = addresses.find(isInternalAddress);
  return internal ? `the host resolves to ${internal}, a loopback, private or otherwise internal address` : null;
}

/**
 * A `lookup` for http.request that refuses internal addresses when `refuseInternal`: the check
 * happens on the addresses the connection is about to use, so DNS answering differently since
 * the webhook was created changes nothing.
 */
export function guardedLookup(refuseInternal: boolean): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return (callback as (e: Error | null, a: string, f: number) => void)(err, "", 0);
      const internal = refuseInternal ? addresses.find((a) => isInternalAddress(a.address)) : undefined;
      if (internal) {
        const refusal = Object.assign(new Error(`refused: ${hostname} resolves to ${internal.address}, an internal address`), { code: "EINTERNALTARGET" });
        return (callback as (e: Error | null, a: string, f: number) => void)(refusal, "", 0);
      }
      if (options.all) return (callback as (e: Error | null, a: typeof addresses) => void)(null, addresses);
      const first = addresses[0]!;
      (callback as (e: Error | null, a: string, f: number) => void)(null, first.address, first.family);
    });
  };
}

/** For the sender: the literal host of `url` when it is an internal address that must be refused (a literal never goes through lookup). */
export function refusedLiteral(url: URL, refuseInternal: boolean): string | null {
  if (!refuseInternal) return null;
  const literal = literalHost(url);
  return literal !== null && isInternalAddress(literal) ? literal : null;
}
