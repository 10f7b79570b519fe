// The policy layer: Rego generation, opa build, the WebAssembly engine, the authority graph.
export * from "./build.js";
export * from "./engine.js";
export * from "./errors.js";
export * from "./graph-types.js";
export { GOVERNANCE_COLUMNS, parseGovernanceDocument } from "./governance-import.js";
export { generateGraph } from "./graph-generation.js";
export { validateGraph } from "./graph-checks.js";
export { indexGraph, type Grant, type GraphIndex } from "./graph-index.js";
export { opaPath } from "./opa.js";
export * from "./rules.js";
