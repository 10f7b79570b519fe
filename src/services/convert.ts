import { timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { PERMISSIONS, type Permission } from "../base/caller.js";
import { validationFailed } from "../base/errors.js";

/** A Date as a protobuf Timestamp; undefined stays undefined (the field is then omitted). */
export function ts(date: Date | null | undefined): Timestamp | undefined {
  return date ? timestampFromDate(date) : undefined;
}

/** Proto Permission enum numbers follow the PERMISSIONS order from 1. */
export function permissionToProto(p: Permission): number {
  return PERMISSIONS.indexOf(p) + 1;
}

/** The domain permission of a proto enum number; 422 for UNSPECIFIED or unknown numbers. */
export function permissionFromProto(n: number, field: string): Permission {
  const p = PERMISSIONS[n - 1];
  if (!p) throw validationFailed([{ field, code: "invalid_enum", message: "unknown permission" }]);
  return p;
}

/** Maps between a domain string union and a proto enum whose values are declared in the same order from 1. */
export function enumCodec<T extends string>(values: readonly T[], what: string) {
  return {
    toProto: (v: T): number => values.indexOf(v) + 1,
    fromProto: (n: number, field: string): T => {
      const v = values[n - 1];
      if (!v) throw validationFailed([{ field, code: n === 0 ? "required" : "invalid_enum", message: `a ${what} is required` }]);
      return v;
    },
  };
}
