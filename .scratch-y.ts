import { parseText } from "./src/policy/source.js";
console.log(JSON.stringify(parseText('{\n  "actions": ["a"],\n  "rules": [\n}')));
console.log(JSON.stringify(parseText("actions: [a]\nactions: [b]\nrules: []")));
