import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { EventStreams, StreamItem } from "../domain/event-stream.js";
import type { EventSchema, EventService } from "../gen/mandate/v1alpha/events_pb.js";
import { orgCaller } from "./context.js";
import { ts } from "./convert.js";

/** The Event message of a stream item: the envelope, or a heartbeat with only `heartbeat_at`. */
export function eventMessage(item: StreamItem): MessageInitShape<typeof EventSchema> {
  if ("heartbeatAt" in item) return { heartbeatAt: ts(item.heartbeatAt) };
  const e = item.event;
  return { event: e.event, eventId: e.event_id, occurredAt: ts(new Date(e.occurred_at)), data: e.data as JsonObject };
}

/** EventService: the organization's live event stream (docs/events.md). */
export class EventServiceImpl implements ServiceImpl<typeof EventService> {
  constructor(private readonly streams: EventStreams) {}

  async *watchEvents(req: { types: string[]; after: string }, ctx: HandlerContext): AsyncGenerator<MessageInitShape<typeof EventSchema>> {
    // A Server-Sent Events client resumes by sending Last-Event-ID: the last event it received,
    // so it wins over an `after` left in the URL it first opened (which would replay from there).
    const after = ctx.requestHeader.get("last-event-id") || req.after;
    for await (const item of this.streams.watch(orgCaller(ctx), { types: req.types, after }, ctx.signal)) yield eventMessage(item);
  }
}
