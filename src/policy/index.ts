// The policy layer: Rego generation, opa build, the WebAssembly engine, the authority graph.
export * from "./build.js";
export * from "./engine.js";
export * from "./errors.js";
export * from "./graph.js";
export { indexGraph, type Grant, type GraphIndex } from "./graph-index.js";
export { opaPath } from "./opa.js";
export * from "./rules.js";
