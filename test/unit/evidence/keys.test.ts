import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { calculateJwkThumbprint, CompactSign, compactVerify, createLocalJWKSet, jwtVerify, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { EvidenceKeyring, generateEvidenceKey, importEd25519PublicJwk, jwkThumbprint, verifyEd25519 } from "../../../src/evidence/keys.js";
import { createKeyRow } from "./chain-fixture.js";

const DATA = new TextEncoder().encode("3f0c…digest bytes");

describe("generateEvidenceKey", () => {
  it("makes an Ed25519 key whose kid is the RFC 7638 thumbprint of its public JWK", async () => {
    const key = await generateEvidenceKey();
    expect(key.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(key.publicJwk).toEqual({ kty: "OKP", crv: "Ed25519", x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), kid: key.kid, alg: "EdDSA", use: "sig" });
    expect(key.kid).toBe(await calculateJwkThumbprint({ kty: "OKP", crv: "Ed25519", x: key.publicJwk.x }));
    expect(createPublicKey(key.privateKeyPem).export({ format: "jwk" }).x).toBe(key.publicJwk.x);
  });
});

describe("EvidenceKeyring", () => {
  it("signs with the active key and verifies the signature, and nothing altered", async () => {
    const keyring = new EvidenceKeyring([await createKeyRow(true)]);
    const { kid, signature } = keyring.sign(DATA);
    expect(kid).toBe(keyring.activeKid);
    expect(signature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(keyring.verify(kid, DATA, signature)).toBe(true);
    expect(keyring.verify(kid, new TextEncoder().encode("other bytes"), signature)).toBe(false);
    expect(keyring.verify("unknown-kid", DATA, signature)).toBe(false);
  });

  it("refuses malformed and non-canonical signature encodings instead of throwing", async () => {
    const keyring = new EvidenceKeyring([await createKeyRow(true)]);
    const { kid, signature } = keyring.sign(DATA);
    expect(keyring.verify(kid, DATA, `${signature}==`)).toBe(false);
    expect(keyring.verify(kid, DATA, Buffer.from(signature, "base64url").toString("base64"))).toBe(false);
    expect(keyring.verify(kid, DATA, "not a signature")).toBe(false);
    // 86 base64url characters carry 516 bits: setting the 4 spare bits gives another spelling of the same 64 bytes.
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const variant = signature.slice(0, -1) + alphabet[alphabet.indexOf(signature.at(-1)!) | 0b1111];
    expect(Buffer.from(variant, "base64url")).toEqual(Buffer.from(signature, "base64url"));
    expect(keyring.verify(kid, DATA, variant)).toBe(false);
  });

  it("keeps verifying with retired public-only keys after a rotation", async () => {
    const old = await createKeyRow(true);
    const before = new EvidenceKeyring([old]);
    const signed = before.sign(DATA);

    const next = await createKeyRow(true);
    const after = new EvidenceKeyring([{ ...old, active: false, private_key_pem: null }, next]);
    expect(after.activeKid).toBe(next.kid);
    expect(after.sign(DATA).kid).toBe(next.kid);
    expect(after.verify(signed.kid, DATA, signed.signature)).toBe(true);
    expect(after.jwks().keys.map((jwk) => jwk.kid)).toEqual([old.kid, next.kid]);
  });

  it("publishes a JWKS of public keys only, in the exact member set", async () => {
    const rows = [await createKeyRow(false), await createKeyRow(true)];
    const jwks = new EvidenceKeyring(rows).jwks();
    expect(jwks.keys).toHaveLength(2);
    for (const [i, jwk] of jwks.keys.entries()) {
      expect(Object.keys(jwk).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x"]);
      expect(jwk).toMatchObject({ kid: rows[i]!.kid, kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig", x: rows[i]!.public_jwk.x });
    }
  });

  it("hands jose a private key whose JWS verifies against the published JWKS", async () => {
    const keyring = new EvidenceKeyring([await createKeyRow(false), await createKeyRow(true)]);
    const jwks = createLocalJWKSet(keyring.jwks());

    const jws = await new CompactSign(DATA).setProtectedHeader({ alg: "EdDSA", kid: keyring.activeKid }).sign(keyring.privateKeyObject());
    const verified = await compactVerify(jws, jwks);
    expect(Buffer.from(verified.payload)).toEqual(Buffer.from(DATA));

    const jwt = await new SignJWT({ act: "vendor_payment" })
      .setProtectedHeader({ alg: "EdDSA", kid: keyring.activeKid })
      .setJti("cap_1")
      .setAudience("erp-gateway")
      .setExpirationTime("5m")
      .sign(keyring.privateKeyObject());
    const { payload } = await jwtVerify(jwt, jwks, { audience: "erp-gateway" });
    expect(payload.act).toBe("vendor_payment");
  });

  it("hands out the cached key object rather than parsing per call", async () => {
    const keyring = new EvidenceKeyring([await createKeyRow(true)]);
    expect(keyring.privateKeyObject()).toBe(keyring.privateKeyObject());
  });

  describe("refuses an unusable key set", () => {
    it("no active key", async () => {
      const rows = [await createKeyRow(false)];
      expect(() => new EvidenceKeyring(rows)).toThrow(/no active evidence key/);
    });

    it("two active keys", async () => {
      const rows = [await createKeyRow(true), await createKeyRow(true)];
      expect(() => new EvidenceKeyring(rows)).toThrow(/more than one active/);
    });

    it("an active key without its private key", async () => {
      const row = await createKeyRow(true);
      expect(() => new EvidenceKeyring([{ ...row, private_key_pem: null }])).toThrow(/has no private key/);
    });

    it("a private key that does not match its public JWK", async () => {
      const [row, other] = [await createKeyRow(true), await createKeyRow(false)];
      expect(() => new EvidenceKeyring([{ ...row, public_jwk: other.public_jwk }])).toThrow(/does not match/);
    });

    it("a kid used twice", async () => {
      const row = await createKeyRow(true);
      expect(() => new EvidenceKeyring([row, { ...row, active: false }])).toThrow(/appears twice/);
    });

    it("a public JWK that carries the private part", async () => {
      const row = await createKeyRow(true);
      const { privateKey } = generateKeyPairSync("ed25519");
      const privateJwk = { ...privateKey.export({ format: "jwk" }) };
      expect(() => new EvidenceKeyring([row, { kid: "leaky", public_jwk: privateJwk, active: false }])).toThrow(/private JWK/);
    });

    it("a non-Ed25519 key", async () => {
      const row = await createKeyRow(true);
      const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "jwk" });
      expect(() => new EvidenceKeyring([row, { kid: "ec", public_jwk: { ...ec }, active: false }])).toThrow(/not an Ed25519 key/);
    });
  });
});

describe("importEd25519PublicJwk / verifyEd25519", () => {
  it("verify what the keyring signs, from the published JWK alone", async () => {
    const keyring = new EvidenceKeyring([await createKeyRow(true)]);
    const publicKey = importEd25519PublicJwk(keyring.jwks().keys[0]!);
    const { signature } = keyring.sign(DATA);
    expect(verifyEd25519(publicKey, DATA, signature)).toBe(true);
    expect(verifyEd25519(publicKey, DATA, signature.replace(/^./, (c) => (c === "A" ? "B" : "A")))).toBe(false);
  });

  it("refuses an x of the wrong length", () => {
    expect(() => importEd25519PublicJwk({ kty: "OKP", crv: "Ed25519", x: "AAAA" })).toThrow(/32 bytes/);
  });
});

describe("jwkThumbprint", () => {
  it("is the kid of a service key, computed from the key members whatever the kid says", async () => {
    const key = await generateEvidenceKey();
    expect(await jwkThumbprint(key.publicJwk)).toBe(key.kid);
    expect(await jwkThumbprint({ ...key.publicJwk, kid: "claims-to-be-another" })).toBe(key.kid);
    const other = await generateEvidenceKey();
    expect(await jwkThumbprint({ ...other.publicJwk, kid: key.kid })).toBe(other.kid);
  });

  it("is null for a JWK without the members its type requires", async () => {
    expect(await jwkThumbprint({ kty: "OKP", crv: "Ed25519", kid: "no-x" })).toBeNull();
    expect(await jwkThumbprint({ kid: "no-kty" })).toBeNull();
  });
});
