import { describe, expect, it } from "vitest";
import { parseGovernanceDocument } from "../../../src/policy/governance-import.js";
import { validateGraph } from "../../../src/policy/graph-checks.js";
import { generateGraph } from "../../../src/policy/graph-generation.js";
import type { AuthorityGraph, GovernanceDocument, GovernanceError } from "../../../src/policy/graph-types.js";
import { indexGraph } from "../../../src/policy/graph-index.js";
import { fixtureGraph, loadAuthorityFixture } from "../../policy-fixtures/fixture.js";

const fixture = loadAuthorityFixture();
const known = new Set(fixture.principal_refs);

// The fixture graph written as the three governance documents.
const csvDocuments: GovernanceDocument[] = [
  {
    document_id: "doc_schedule",
    kind: "signing_schedule",
    format: "csv",
    content: [
      "principal,role,reports_to",
      "E100,ceo,",
      "E200,cfo,ceo",
      "E300,finance_manager,cfo",
      "E400,ap_clerk,finance_manager",
      "E401,ap_clerk,",
      "E500,procurement_lead,ceo",
      "E600,buyer,procurement_lead",
      "",
    ].join("\n"),
  },
  {
    document_id: "doc_doa",
    kind: "delegation_of_authority",
    format: "csv",
    content: [
      "holder,delegate,action,currency,max_amount,valid_until",
      "role:ap_clerk,,vendor_payment,USD,5000,",
      "role:ap_clerk,,vendor_payment,EUR,4000,",
      "role:ap_clerk,,expense_claim,USD,300,",
      "role:finance_manager,,vendor_payment,USD,25000,",
      "role:cfo,,vendor_payment,USD,250000,",
      "role:buyer,,purchase_order_submit,USD,10000,",
      "role:procurement_lead,,purchase_order_submit,USD,50000,",
      "E500,,vendor_payment,USD,2000,",
      "E700,,vendor_payment,USD,5000,",
      "E300,E700,vendor_payment,USD,15000,2026-12-31",
      "E700,E900,vendor_payment,USD,12000,2027-06-30",
      "E200,E950,vendor_payment,USD,1000,2025-12-31",
      '"role:procurement_lead","E960","purchase_order_submit","USD","20000",""',
    ].join("\r\n"),
  },
  {
    document_id: "doc_matrix",
    kind: "approval_matrix",
    format: "csv",
    content: [
      "action,currency,up_to_amount,approvals_required",
      "vendor_payment,USD,1000,0",
      "vendor_payment,USD,10000,1",
      "vendor_payment,USD,100000,2",
      "vendor_payment,EUR,2000,0",
      "vendor_payment,EUR,4000,1",
      "purchase_order_submit,USD,25000,0",
      "purchase_order_submit,USD,50000,1",
    ].join("\n"),
  },
];

function errorsOf(result: { ok: true } | { ok: false; errors: GovernanceError[] }): Omit<GovernanceError, "message">[] {
  expect(result.ok).toBe(false);
  return result.ok ? [] : result.errors.map(({ message: _message, ...rest }) => rest);
}

describe("parseGovernanceDocument", () => {
  it("reads each kind of CSV document", () => {
    const parsed = csvDocuments.map(parseGovernanceDocument);
    expect(parsed.map((p) => p.ok && p.rows.length)).toEqual([7, 13, 7]);
    expect(parsed[1]?.ok && parsed[1].rows[9]).toEqual({
      row: 10,
      holder: "E300",
      delegate: "E700",
      action: "vendor_payment",
      currency: "USD",
      max_amount: 15000,
      valid_until: "2026-12-31",
    });
  });

  it("reports each bad field by data row and column; blank lines count as rows", () => {
    const doc: GovernanceDocument = {
      document_id: "doc_bad",
      kind: "delegation_of_authority",
      format: "csv",
      content: [
        "holder,delegate,action,currency,max_amount,valid_until",
        "role:ap_clerk,,vendor_payment,usd,5000,",
        "",
        "E300,E700,vendor_payment,USD,-5,2026-02-30",
        'E300,E700,vendor_payment,USD,"1,000",',
        "E300,,vendor_payment,USD",
        ",E700,vendor payment,USD,10,",
        "role:,E700,vendor_payment,USD,10,31/12/2026",
      ].join("\n"),
    };
    expect(errorsOf(parseGovernanceDocument(doc))).toEqual([
      { document_id: "doc_bad", row: 1, field: "currency", code: "invalid_value" },
      { document_id: "doc_bad", row: 3, field: "max_amount", code: "negative_amount" },
      { document_id: "doc_bad", row: 3, field: "valid_until", code: "invalid_date" },
      { document_id: "doc_bad", row: 4, field: "max_amount", code: "invalid_value" },
      { document_id: "doc_bad", row: 5, field: null, code: "invalid_row", line: 6, column: 5 },
      { document_id: "doc_bad", row: 6, field: "holder", code: "missing_field" },
      { document_id: "doc_bad", row: 6, field: "action", code: "invalid_value" },
      { document_id: "doc_bad", row: 7, field: "holder", code: "invalid_value" },
      { document_id: "doc_bad", row: 7, field: "valid_until", code: "invalid_date" },
    ]);
  });

  // name -> [document, error code]
  const refused: [string, GovernanceDocument, string][] = [
    ["a wrong header", { document_id: "d", kind: "approval_matrix", format: "csv", content: "action,currency,amount,approvals\n" }, "invalid_header"],
    ["an extra column", { document_id: "d", kind: "signing_schedule", format: "csv", content: "principal,role,reports_to,notes\n" }, "invalid_header"],
    ["a CSV syntax error", { document_id: "d", kind: "signing_schedule", format: "csv", content: 'principal,role,reports_to\n"E1,ceo,\n' }, "invalid_csv"],
    ["invalid JSON", { document_id: "d", kind: "signing_schedule", format: "json", content: "[{" }, "invalid_json"],
    ["invalid YAML", { document_id: "d", kind: "signing_schedule", format: "yaml", content: "- role: [ceo\n" }, "invalid_yaml"],
    ["a document that is not a list", { document_id: "d", kind: "signing_schedule", format: "json", content: '{"rows": []}' }, "invalid_document"],
    ["an unknown format", { document_id: "d", kind: "signing_schedule", format: "xlsx" as "csv", content: "" }, "invalid_format"],
  ];

  it.each(refused)("refuses %s as a whole", (_name, doc, code) => {
    expect(errorsOf(parseGovernanceDocument(doc))[0]).toMatchObject({ document_id: "d", row: null, code });
  });

  // name -> [CSV content of a signing schedule, the error without its message, start of the message]
  const malformed: [string, string, Omit<GovernanceError, "message">, string][] = [
    [
      "an unclosed quote",
      'principal,role,reports_to\nE100,ceo,\nE200,"cfo,ceo\nE300,finance_manager,cfo\n',
      { document_id: "d", row: null, field: null, code: "invalid_csv", line: 3, column: 2 },
      "line 3, column 2: a quoted field is never closed",
    ],
    [
      "a stray quote",
      'principal,role,reports_to\nE100,ceo,\nE200,cfo,c"eo\n',
      { document_id: "d", row: null, field: null, code: "invalid_csv", line: 3, column: 3 },
      "line 3, column 3: a quote inside an unquoted field",
    ],
    [
      "text after a closing quote",
      'principal,role,reports_to\r\n"E100"x,ceo,\r\n',
      { document_id: "d", row: null, field: null, code: "invalid_csv", line: 2, column: 1 },
      "line 2, column 1: unexpected character after a closing quote",
    ],
    [
      "too few columns",
      'principal,role,reports_to\nE100,ceo,\n"E200\nE201",cfo\n',
      { document_id: "d", row: 2, field: null, code: "invalid_row", line: 3, column: 3 },
      "expected 3 fields, found 2 (line 3)",
    ],
    [
      "too many columns",
      "principal,role,reports_to\nE100,ceo,,\n",
      { document_id: "d", row: 1, field: null, code: "invalid_row", line: 2, column: 4 },
      "expected 3 fields, found 4 (line 2)",
    ],
  ];

  it.each(malformed)("refuses a CSV document with %s, naming its line and column", (_name, content, error, message) => {
    const parsed = parseGovernanceDocument({ document_id: "d", kind: "signing_schedule", format: "csv", content });
    expect(errorsOf(parsed)).toEqual([error]);
    expect(!parsed.ok && parsed.errors[0]?.message.startsWith(message)).toBe(true);
  });

  it("reads YAML and JSON rows by 0-based index, with typed values", () => {
    const yaml: GovernanceDocument = {
      document_id: "doc_yaml",
      kind: "approval_matrix",
      format: "yaml",
      content: [
        "- {action: vendor_payment, currency: USD, up_to_amount: 1000, approvals_required: 0}",
        "- {action: vendor_payment, currency: USD, up_to_amount: '5000', approvals_required: 1.5}",
        "- {action: vendor_payment, currency: USD, up_to_amount: 9000, approvals_required: 2, note: x}",
        "- just a string",
      ].join("\n"),
    };
    expect(errorsOf(parseGovernanceDocument(yaml))).toEqual([
      { document_id: "doc_yaml", row: 1, field: "up_to_amount", code: "invalid_value" },
      { document_id: "doc_yaml", row: 1, field: "approvals_required", code: "invalid_value" },
      { document_id: "doc_yaml", row: 2, field: "note", code: "unknown_field" },
      { document_id: "doc_yaml", row: 3, field: null, code: "invalid_row" },
    ]);
    const json: GovernanceDocument = {
      document_id: "doc_json",
      kind: "signing_schedule",
      format: "json",
      content: '[{"principal": null, "role": "ceo"}, {"principal": "E200", "role": "cfo", "reports_to": "ceo"}]',
    };
    const parsed = parseGovernanceDocument(json);
    expect(parsed.ok && parsed.rows).toEqual([
      { row: 0, principal: null, role: "ceo", reports_to: null },
      { row: 1, principal: "E200", role: "cfo", reports_to: "ceo" },
    ]);
  });
});

describe("generateGraph", () => {
  it("turns the governance documents into the fixture's graph", () => {
    const generated = generateGraph(csvDocuments, known);
    expect(generated.ok).toBe(true);
    if (!generated.ok) return;
    expect(indexGraph(generated.graph, 1)).toEqual(indexGraph(fixtureGraph(fixture), 1));
  });

  it("reads the same graph from YAML and JSON documents", () => {
    const asRows = (doc: GovernanceDocument) => {
      const parsed = parseGovernanceDocument(doc);
      if (!parsed.ok) throw new Error("fixture document invalid");
      return parsed.rows.map(({ row: _row, ...fields }) => fields);
    };
    const [schedule, doa, matrix] = csvDocuments as [GovernanceDocument, GovernanceDocument, GovernanceDocument];
    const docs: GovernanceDocument[] = [
      { ...schedule, format: "yaml", content: JSON.stringify(asRows(schedule)).replaceAll("},", "},\n") },
      { ...doa, format: "json", content: JSON.stringify(asRows(doa)) },
      { ...matrix, format: "json", content: JSON.stringify(asRows(matrix)) },
    ];
    const generated = generateGraph(docs, known);
    expect(generated.ok && indexGraph(generated.graph, 1)).toEqual(indexGraph(fixtureGraph(fixture), 1));
  });

  it("reports problems only visible across documents against their rows", () => {
    const docs: GovernanceDocument[] = [
      {
        document_id: "sched",
        kind: "signing_schedule",
        format: "csv",
        content: "principal,role,reports_to\nE100,ceo,\nE999,cfo,ceo\nE200,cfo,coo\n",
      },
      {
        document_id: "doa",
        kind: "delegation_of_authority",
        format: "csv",
        content: [
          "holder,delegate,action,currency,max_amount,valid_until",
          "role:cfo,,vendor_payment,USD,1000,",
          "role:cfo,E300,vendor_payment,USD,5000,",
          "role:ghost,E300,vendor_payment,USD,10,",
          "E300,E300,vendor_payment,USD,10,",
        ].join("\n"),
      },
    ];
    expect(errorsOf(generateGraph(docs, known))).toEqual([
      { document_id: "sched", row: 3, field: "reports_to", code: "conflicting_reports_to" },
    ]);
    const fixed = [{ ...docs[0]!, content: "principal,role,reports_to\nE100,ceo,\nE999,cfo,ceo\n" }, docs[1]!];
    expect(errorsOf(generateGraph(fixed, known))).toEqual([
      { document_id: "sched", row: 2, field: "principal", code: "unknown_principal" },
      { document_id: "doa", row: 3, field: "holder", code: "unknown_role" },
      { document_id: "doa", row: 4, field: "delegate", code: "self_delegation" },
    ]);
    // Amounts are compared once references are sound, so a missing role cannot look like an excess.
    const sound = [
      { ...docs[0]!, content: "principal,role,reports_to\nE100,ceo,\nE200,cfo,ceo\n" },
      { ...docs[1]!, content: (docs[1]!.content as string).split("\n").slice(0, 3).join("\n") },
    ];
    expect(errorsOf(generateGraph(sound, known))).toEqual([
      { document_id: "doa", row: 2, field: "max_amount", code: "exceeds_holder_authority" },
    ]);
  });

  it("reports a role cycle at the row that closes it", () => {
    const docs: GovernanceDocument[] = [
      { document_id: "s", kind: "signing_schedule", format: "csv", content: "principal,role,reports_to\n,a,b\n,b,c\n,c,a\n" },
    ];
    expect(errorsOf(generateGraph(docs, known))).toEqual([{ document_id: "s", row: 1, field: "reports_to", code: "role_cycle" }]);
  });

  it("reports parse errors of every document", () => {
    const docs: GovernanceDocument[] = [
      { document_id: "a", kind: "signing_schedule", format: "csv", content: "wrong\n" },
      { document_id: "b", kind: "approval_matrix", format: "csv", content: "action,currency,up_to_amount,approvals_required\nx,USD,1,11\n" },
    ];
    expect(errorsOf(generateGraph(docs, known))).toEqual([
      { document_id: "a", row: null, field: null, code: "invalid_header" },
      { document_id: "b", row: 1, field: "approvals_required", code: "invalid_value" },
    ]);
  });
});

describe("validateGraph", () => {
  const base = (): AuthorityGraph => structuredClone(fixtureGraph(fixture));

  it("normalises the fixture graph", () => {
    const result = validateGraph(fixture.graph, known);
    expect(result.ok && result.graph.limits.every((l) => l.valid_until === null)).toBe(true);
    expect(validateGraph({}, known)).toEqual({
      ok: true,
      graph: { roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [] },
    });
  });

  // name -> [change to the fixture graph, path of the problem, code]
  const refused: [string, (g: Record<string, any>) => unknown, string, string][] = [
    ["not an object", () => [], "", "invalid_type"],
    ["an unknown top-level key", (g) => ({ ...g, principals: [] }), "principals", "unknown_key"],
    ["a list that is not a list", (g) => ({ ...g, limits: {} }), "limits", "invalid_type"],
    ["an entry that is not an object", (g) => ({ ...g, memberships: [...g.memberships, "E100"] }), "memberships[7]", "invalid_type"],
    ["an unknown key in an entry", (g) => (g.limits[0].note = "x", g), "limits[0].note", "unknown_field"],
    ["a number where a string belongs", (g) => (g.memberships[0].principal = 100, g), "memberships[0].principal", "invalid_type"],
    ["a missing amount", (g) => (delete g.limits[1].max_amount, g), "limits[1].max_amount", "missing_field"],
    ["a negative amount", (g) => (g.limits[2].max_amount = -1, g), "limits[2].max_amount", "negative_amount"],
    ["an amount as a string", (g) => (g.limits[2].max_amount = "300", g), "limits[2].max_amount", "invalid_value"],
    ["a lowercase currency", (g) => (g.limits[0].currency = "usd", g), "limits[0].currency", "invalid_value"],
    ["an impossible date", (g) => (g.delegations[0].valid_until = "2026-13-01", g), "delegations[0].valid_until", "invalid_date"],
    ["an unknown principal", (g) => (g.memberships[0].principal = "E000", g), "memberships[0].principal", "unknown_principal"],
    ["a role delegate", (g) => (g.delegations[0].delegate = "role:cfo", g), "delegations[0].delegate", "invalid_value"],
    ["an undeclared role", (g) => (g.memberships[0].role = "coo", g), "memberships[0].role", "unknown_role"],
    ["an undeclared role holder", (g) => (g.limits[0].holder = "role:coo", g), "limits[0].holder", "unknown_role"],
    ["a role declared twice", (g) => (g.roles.push({ role: "ceo", reports_to: null }), g), "roles[6].role", "duplicate_role"],
    ["a role cycle", (g) => (g.roles[0].reports_to = "buyer", g), "roles[5].reports_to", "role_cycle"],
    ["a self delegation", (g) => (g.delegations[0].delegate = "E300", g), "delegations[0].delegate", "self_delegation"],
    ["a delegation above what the holder holds", (g) => (g.delegations[0].max_amount = 25000.01, g), "delegations[0].max_amount", "exceeds_holder_authority"],
    ["a delegation of authority never held", (g) => (g.delegations[1].currency = "EUR", g), "delegations[1].max_amount", "exceeds_holder_authority"],
    ["a duplicate band", (g) => (g.approval_matrix.push({ ...g.approval_matrix[0] }), g), "approval_matrix[7].up_to_amount", "duplicate_band"],
    ["a fractional approval count", (g) => (g.approval_matrix[0].approvals_required = 0.5, g), "approval_matrix[0].approvals_required", "invalid_value"],
  ];

  it.each(refused)("refuses %s", (_name, change, path, code) => {
    const result = validateGraph(change(base()), known);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toMatchObject({ path, code });
  });

  it("accepts a delegation of exactly what the holder holds", () => {
    const g = base();
    g.delegations[0]!.max_amount = 25000;
    expect(validateGraph(g, known).ok).toBe(true);
  });
});

describe("indexGraph", () => {
  const index = indexGraph(fixtureGraph(fixture), 1);

  it("keeps for a chained delegate every grant no other beats on both amount and expiry", () => {
    expect(index.authority.E900?.vendor_payment?.USD).toEqual([
      { max_amount: 12000, valid_until: "2026-12-31", via: ["role:finance_manager", "E300", "E700", "E900"] },
      { max_amount: 5000, valid_until: "2027-06-30", via: ["E700", "E900"] },
    ]);
  });

  it("drops grants another one beats", () => {
    // The cfo holds 250000 of its own and 25000 inherited from finance_manager.
    expect(index.authority.E200?.vendor_payment?.USD).toEqual([{ max_amount: 250000, valid_until: null, via: ["role:cfo", "E200"] }]);
  });

  it("does not loop or inflate on delegation cycles", () => {
    const graph: AuthorityGraph = {
      roles: [],
      memberships: [],
      limits: [
        { holder: "A", action: "pay", currency: "USD", max_amount: 100, valid_until: null },
        { holder: "B", action: "pay", currency: "USD", max_amount: 50, valid_until: "2030-01-01" },
      ],
      delegations: [
        { holder: "A", delegate: "B", action: "pay", currency: "USD", max_amount: 80, valid_until: "2029-01-01" },
        { holder: "B", delegate: "A", action: "pay", currency: "USD", max_amount: 80, valid_until: null },
      ],
      approval_matrix: [
        { action: "pay", currency: "USD", up_to_amount: 50, approvals_required: 1 },
        { action: "pay", currency: "USD", up_to_amount: 10, approvals_required: 0 },
      ],
    };
    const { authority, bands } = indexGraph(graph, null);
    expect(authority.A?.pay?.USD).toEqual([{ max_amount: 100, valid_until: null, via: ["A"] }]);
    expect(authority.B?.pay?.USD).toEqual([
      { max_amount: 80, valid_until: "2029-01-01", via: ["A", "B"] },
      { max_amount: 50, valid_until: "2030-01-01", via: ["B"] },
    ]);
    expect(bands.pay?.USD?.map((b) => b.up_to_amount)).toEqual([10, 50]);
  });

  it("treats a principal called __proto__ as data", () => {
    const graph: AuthorityGraph = {
      roles: [],
      memberships: [],
      limits: [{ holder: "__proto__", action: "pay", currency: "USD", max_amount: 1, valid_until: null }],
      delegations: [],
      approval_matrix: [],
    };
    const { authority } = indexGraph(graph, null);
    expect(Object.keys(authority)).toEqual(["__proto__"]);
    expect(JSON.parse(JSON.stringify(authority))).toEqual(JSON.parse('{"__proto__": {"pay": {"USD": [{"max_amount": 1, "valid_until": null, "via": ["__proto__"]}]}}}'));
  });
});
