import { BlockList, isIP } from "node:net";

/** How a request's client address is found: the socket's peer, or what trusted proxies say it is. */
export type ClientAddressOf = (peer: string, forwardedFor: string | null) => string;

/** The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`), else the address as given. */
function unmapped(address: string): string {
  return address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * Parses MANDATE_TRUSTED_PROXIES entries (addresses or CIDR ranges, IPv4 or IPv6) into a
 * BlockList; throws naming the first entry that is neither.
 */
export function trustedProxyList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits, ...rest] = entry.split("/");
    const family = isIP(address ?? "");
    const prefix = Number(bits);
    if (family === 0 || rest.length > 0 || (bits !== undefined && (!/^\d+$/.test(bits) || prefix > (family === 4 ? 32 : 128)))) {
      throw new Error(`MANDATE_TRUSTED_PROXIES: ${JSON.stringify(entry)} is neither an IP address nor a CIDR range`);
    }
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) list.addAddress(address!, type);
    else list.addSubnet(address!, prefix, type);
  }
  return list;
}

/**
 * Whether an address (a socket's peer, IPv4-mapped or not) is one of the MANDATE_TRUSTED_PROXIES
 * `entries`; throws as trustedProxyList does. The per-address connection cap exempts such peers.
 */
export function createTrustedProxyCheck(entries: readonly string[]): (address: string) => boolean {
  if (entries.length === 0) return () => false;
  const list = trustedProxyList(entries);
  return (address) => {
    const plain = unmapped(address);
    const family = isIP(plain);
    return family !== 0 && list.check(plain, family === 4 ? "ipv4" : "ipv6");
  };
}

/**
 * The client address of a request. With no trusted proxies it is the socket's peer. When the
 * peer is a trusted proxy, X-Forwarded-For is read from the right, skipping trusted proxies: the
 * first address that is not one is the client (what a proxy appends can be believed, what a
 * client wrote before it cannot). A malformed entry ends the walk at the last address believed.
 */
export function createClientAddressOf(trusted: readonly string[]): ClientAddressOf {
  if (trusted.length === 0) return (peer) => peer;
  const isTrusted = createTrustedProxyCheck(trusted);
  return (peer, forwardedFor) => {
    let client = unmapped(peer);
    if (!forwardedFor || !isTrusted(client)) return peer;
    const hops = forwardedFor.split(",").map((h) => unmapped(h.trim()));
    for (let i = hops.length - 1; i >= 0 && isTrusted(client); i--) {
      if (isIP(hops[i]!) === 0) break;
      client = hops[i]!;
    }
    return client;
  };
}
