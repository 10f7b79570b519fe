/**
 * Mandate's TypeScript client (`import { MandateClient, AgentKey } from "mandate/client"`):
 * local Ed25519 keys, signed Intents, decisions and reviews, Capabilities, lifecycle,
 * retries with capped exponential backoff and typed errors. See client.ts for the rules.
 */
export { MandateClient, MAX_RETRIES_LIMIT, type MandateClientOptions, type RequestCredentials, type RequestOptions } from "./client.js";
export { AgentKey } from "./keys.js";
export {
  ApiError,
  AuthenticationError,
  ConflictError,
  GoneError,
  MandateError,
  NotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitedError,
  ResolutionTimeoutError,
  ServerError,
  TransportError,
  ValidationError,
  type FieldError,
} from "./errors.js";
export * from "./types.js";
