import { describe, expect, it } from "vitest";
import { createClientAddressOf, createTrustedProxyCheck, trustedProxyList } from "../../../src/transport/client-address.js";

describe("client address behind trusted proxies", () => {
  const behind = createClientAddressOf(["10.0.0.0/8", "192.168.1.1", "2001:db8::/32"]);

  it("is the socket's peer when no proxy is trusted, whatever X-Forwarded-For says", () => {
    expect(createClientAddressOf([])("203.0.113.9", "198.51.100.1")).toBe("203.0.113.9");
  });

  it("ignores X-Forwarded-For from a peer that is not a trusted proxy", () => {
    expect(behind("203.0.113.9", "198.51.100.1")).toBe("203.0.113.9");
  });

  it("walks X-Forwarded-For from the right, skipping trusted proxies, to the first address that is not one", () => {
    expect(behind("10.0.0.5", "198.51.100.1")).toBe("198.51.100.1");
    expect(behind("10.0.0.5", "198.51.100.1, 192.168.1.1, 10.9.9.9")).toBe("198.51.100.1");
    // What the client wrote before the first untrusted hop cannot be believed.
    expect(behind("10.0.0.5", "1.2.3.4, 198.51.100.1")).toBe("198.51.100.1");
    expect(behind("::ffff:10.0.0.5", "2001:db8::1, 2001:0db9::7")).toBe("2001:0db9::7");
  });

  it("stops at the last believed address when an entry is malformed, and without the header keeps the peer", () => {
    expect(behind("10.0.0.5", "198.51.100.1, not-an-ip")).toBe("10.0.0.5");
    expect(behind("10.0.0.5", null)).toBe("10.0.0.5");
    expect(behind("10.0.0.5", "10.1.1.1, 192.168.1.1")).toBe("10.1.1.1");
  });

  it("recognises a trusted proxy peer, IPv4-mapped too, for the per-address connection cap", () => {
    const isTrusted = createTrustedProxyCheck(["10.0.0.0/8", "2001:db8::/32"]);
    expect([isTrusted("10.1.2.3"), isTrusted("::ffff:10.1.2.3"), isTrusted("2001:db8::9")]).toEqual([true, true, true]);
    expect([isTrusted("11.0.0.1"), isTrusted("::ffff:11.0.0.1"), isTrusted("2001:db9::9"), isTrusted("")]).toEqual([false, false, false, false]);
    expect(createTrustedProxyCheck([])("10.1.2.3")).toBe(false);
  });

  it("refuses an entry that is neither an address nor a CIDR range, naming it", () => {
    expect(() => trustedProxyList(["10.0.0.0/33"])).toThrow(/MANDATE_TRUSTED_PROXIES: "10.0.0.0\/33"/);
    expect(() => trustedProxyList(["proxy.internal"])).toThrow(/proxy\.internal/);
    expect(() => trustedProxyList(["10.0.0.1/8/2"])).toThrow();
  });
});
