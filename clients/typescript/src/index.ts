/**
 * Mandate's TypeScript client (`import { MandateClient, AgentKey } from "@mandate/client"`),
 * browser-safe (fetch, WebCrypto, noble's Ed25519; key files are in `@mandate/client/node`):
 * local Ed25519 keys, signed Intents, decisions and reviews, Capabilities, lifecycle,
 * retries with capped exponential backoff and typed errors; events (early access): the
 * resumable stream (`watchEvents`), webhook subscriptions and `verifyWebhook` for receivers.
 * See client.ts for the rules.
 */
export {
  MandateClient,
  MAX_RETRIES_LIMIT,
  type MandateClientOptions,
  type RequestCredentials,
  type RequestOptions,
  type WaitForResolutionOptions,
  type WatchEventsOptions,
} from "./client.js";
export { SseParser, verifyWebhook, WEBHOOK_TOLERANCE_SECONDS, type SseMessage, type WebhookHeaders } from "./events.js";
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
  WebhookVerificationError,
  type FieldError,
} from "./errors.js";
export * from "./types.js";
