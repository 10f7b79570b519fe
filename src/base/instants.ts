/** RFC 3339 date-time: a four-digit year, seconds, optional fraction, `Z` or a numeric offset. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:Z|[+-](\d{2}):(\d{2}))$/;

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate();

/**
 * Parses an instant a client sent: RFC 3339, a real calendar date and time, in years
 * 1970..9999 (what Postgres and the wire form both hold, and all a timestamp in this
 * API can mean). Null for anything else, so callers answer 422 rather than storing a
 * date Postgres refuses or JavaScript silently rolled over (2024-02-30 is not 1 March).
 */
export function parseInstant(text: unknown): Date | null {
  if (typeof text !== "string") return null;
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((v) => (v === undefined ? 0 : Number(v)));
  if (year! < 1970 || month! < 1 || month! > 12 || day! < 1 || day! > daysIn(year!, month!)) return null;
  if (hour! > 23 || minute! > 59 || second! > 59 || offsetHours! > 23 || offsetMinutes! > 59) return null;
  const at = new Date(text);
  return Number.isNaN(at.getTime()) || at.getUTCFullYear() > 9999 ? null : at;
}
