-- The SHA-256 of the exact token issued for each capability. A presented token whose digest
-- matches is byte for byte the one the service signed, so verification need not check its
-- Ed25519 signature again (the costliest step of a consume). Capabilities issued before this
-- column existed have none and are verified by their signature.
ALTER TABLE capabilities ADD COLUMN token_digest text;
