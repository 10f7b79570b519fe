/**
 * The built-in functions a policy may call: the only ones publishing compiles (docs/architecture.md,
 * Policies; the README lists them under "Writing policies"). They are the built-ins the
 * opa-wasm SDK executes in JavaScript or that opa compiles into the WebAssembly itself, less
 * those that would make a decision depend on something besides the bundle and its input:
 * `rand.intn`, and the clock (`time.now_ns`; the input carries `now`). Anything else
 * (`http.send`, `time.now_ns`, `crypto.*`, `io.jwt.*`, `net.lookup_ip_addr`, …) fails to compile
 * with a located `rego_type_error: undefined function`, at authoring time as at publish, and
 * in `mandate policy test`. `wasmCapabilities` (opa.ts) turns this list into opa's capabilities
 * and refuses to start when this opa or this SDK lacks one of them, so an upgrade that changes
 * the set is noticed rather than silently narrowing or widening it.
 *
 * Operators count too: `plus` is `+`, `eq` is `=`, `internal.member_2` is `x in xs`, and so on.
 */
export const WASM_BUILTINS: readonly string[] = [
  "abs", "all", "and", "any", "array.concat", "array.slice", "assign", "base64.decode", "base64.encode",
  "base64.is_valid", "base64url.decode", "base64url.encode", "bits.and", "bits.lsh", "bits.negate",
  "bits.or", "bits.rsh", "bits.xor", "ceil", "concat", "contains", "count", "div", "endswith", "eq", "equal",
  "floor", "format_int", "glob.match", "graph.reachable", "gt", "gte", "indexof", "internal.member_2",
  "internal.member_3", "intersection", "is_array", "is_boolean", "is_null", "is_number", "is_object",
  "is_set", "is_string", "json.filter", "json.is_valid", "json.marshal", "json.remove", "json.unmarshal",
  "lower", "lt", "lte", "max", "min", "minus", "mul", "neq", "net.cidr_contains", "net.cidr_intersects",
  "numbers.range", "object.filter", "object.get", "object.remove", "object.union", "or", "plus", "product",
  "re_match", "regex.find_all_string_submatch_n", "regex.is_valid", "regex.match", "rem", "replace", "round",
  "set_diff", "sort", "split", "sprintf", "startswith", "strings.replace_n", "substring", "sum", "time.diff",
  "to_number", "trim", "trim_left", "trim_prefix", "trim_right", "trim_space", "trim_suffix", "type_name",
  "union", "upper", "walk", "yaml.is_valid", "yaml.marshal", "yaml.unmarshal",
];
