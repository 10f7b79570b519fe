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
    // File lines: the header is line 1.
    expect(parsed[1]?.ok && parsed[1].rows[9]).toEqual({
      line: 11,
      holder: "E300",
      delegate: "E700",
      action: "vendor_payment",
      currency: "USD",
      max_amount: 15000,
      valid_until: "2026-12-31",
    });
  });

  it("reports each bad field at its file line and CSV column, echoing the value", () => {
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
    const parsed = parseGovernanceDocument(doc);
    expect(errorsOf(parsed)).toEqual([
      { document_id: "doc_bad", line: 2, column: 4, field: "currency", code: "invalid_value" },
      { document_id: "doc_bad", line: 4, column: 5, field: "max_amount", code: "negative_amount" },
      { document_id: "doc_bad", line: 4, column: 6, field: "valid_until", code: "invalid_date" },
      { document_id: "doc_bad", line: 5, column: 5, field: "max_amount", code: "invalid_value" },
      { document_id: "doc_bad", line: 6, column: 5, field: null, code: "invalid_row" },
      { document_id: "doc_bad", line: 7, column: 1, field: "holder", code: "missing_field" },
      { document_id: "doc_bad", line: 7, column: 3, field: "action", code: "invalid_value" },
      { document_id: "doc_bad", line: 8, column: 1, field: "holder", code: "invalid_value" },
      { document_id: "doc_bad", line: 8, column: 6, field: "valid_until", code: "invalid_date" },
    ]);
    const messages = parsed.ok ? [] : parsed.errors.map((e) => e.message);
    expect(messages[0]).toBe('a currency must be a three-letter ISO 4217 code in capitals (found "usd")');
    expect(messages[1]).toBe('max_amount must not be negative (found "-5")');
    expect(messages[2]).toBe('valid_until must be an ISO date, YYYY-MM-DD (found "2026-02-30")');
    expect(messages[3]).toContain('(found "1,000")');
    expect(messages[4]).toBe('expected 6 fields, found 4 ("E300,,vendor_payment,USD")');
    expect(messages[8]).toContain('(found "31/12/2026")');
  });

  // name -> [document, error code, where: the file line and column (null: the document as a whole)]
  const refused: [string, GovernanceDocument, string, { line: number | null; column?: number }][] = [
    ["a wrong header", { document_id: "d", kind: "approval_matrix", format: "csv", content: "action,currency,amount,approvals\n" }, "invalid_header", { line: 1, column: 3 }],
    ["an extra column", { document_id: "d", kind: "signing_schedule", format: "csv", content: "principal,role,reports_to,notes\n" }, "invalid_header", { line: 1, column: 4 }],
    ["a CSV syntax error", { document_id: "d", kind: "signing_schedule", format: "csv", content: 'principal,role,reports_to\n"E1,ceo,\n' }, "invalid_csv", { line: 2, column: 1 }],
    ["invalid JSON", { document_id: "d", kind: "signing_schedule", format: "json", content: '[\n  {"role": "ceo",}\n]' }, "invalid_json", { line: 2, column: 18 }],
    ["truncated JSON", { document_id: "d", kind: "signing_schedule", format: "json", content: "[{" }, "invalid_json", { line: 1, column: 3 }],
    ["invalid YAML", { document_id: "d", kind: "signing_schedule", format: "yaml", content: "- role: ceo\n- role: [cfo\n" }, "invalid_yaml", { line: 3, column: 1 }],
    ["a document that is not a list", { document_id: "d", kind: "signing_schedule", format: "json", content: '\n{"rows": []}' }, "invalid_document", { line: 2, column: 1 }],
    ["an unknown format", { document_id: "d", kind: "signing_schedule", format: "xlsx" as "csv", content: "" }, "invalid_format", { line: null }],
  ];

  it.each(refused)("refuses %s as a whole", (_name, doc, code, where) => {
    expect(errorsOf(parseGovernanceDocument(doc))[0]).toEqual({ document_id: "d", field: null, code, ...where });
  });

  // name -> [CSV content of a signing schedule, the error without its message, start of the message]
  const malformed: [string, string, Omit<GovernanceError, "message">, string][] = [
    [
      "an unclosed quote",
      'principal,role,reports_to\nE100,ceo,\nE200,"cfo,ceo\nE300,finance_manager,cfo\n',
      { document_id: "d", field: null, code: "invalid_csv", line: 3, column: 2 },
      "a quoted field is never closed",
    ],
    [
      "a stray quote",
      'principal,role,reports_to\nE100,ceo,\nE200,cfo,c"eo\n',
      { document_id: "d", field: null, code: "invalid_csv", line: 3, column: 3 },
      "a quote inside an unquoted field",
    ],
    [
      "text after a closing quote",
      'principal,role,reports_to\r\n"E100"x,ceo,\r\n',
      { document_id: "d", field: null, code: "invalid_csv", line: 2, column: 1 },
      "unexpected character after a closing quote",
    ],
    [
      "too few columns",
      'principal,role,reports_to\nE100,ceo,\n"E200\nE201",cfo\n',
      { document_id: "d", field: null, code: "invalid_row", line: 3, column: 3 },
      'expected 3 fields, found 2 ("E200\\nE201,cfo")',
    ],
    [
      "too many columns",
      "principal,role,reports_to\nE100,ceo,,\n",
      { document_id: "d", field: null, code: "invalid_row", line: 2, column: 4 },
      'expected 3 fields, found 4 ("E100,ceo,,")',
    ],
  ];

  it.each(malformed)("refuses a CSV document with %s, naming its line and column", (_name, content, error, message) => {
    const parsed = parseGovernanceDocument({ document_id: "d", kind: "signing_schedule", format: "csv", content });
    expect(errorsOf(parsed)).toEqual([error]);
    expect(!parsed.ok && parsed.errors[0]?.message.startsWith(message)).toBe(true);
  });

  it("reads YAML and JSON rows with typed values, each error at its line and character column", () => {
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
      { document_id: "doc_yaml", line: 2, column: 57, field: "up_to_amount", code: "invalid_value" },
      { document_id: "doc_yaml", line: 2, column: 85, field: "approvals_required", code: "invalid_value" },
      { document_id: "doc_yaml", line: 3, column: 92, field: "note", code: "unknown_field" },
      { document_id: "doc_yaml", line: 4, column: 3, field: null, code: "invalid_row" },
    ]);
    const json: GovernanceDocument = {
      document_id: "doc_json",
      kind: "signing_schedule",
      format: "json",
      content: '[{"principal": null, "role": "ceo"}, {"principal": "E200", "role": "cfo", "reports_to": "ceo"}]',
    };
    const parsed = parseGovernanceDocument(json);
    expect(parsed.ok && parsed.rows).toEqual([
      { line: 1, principal: null, role: "ceo", reports_to: null },
      { line: 1, principal: "E200", role: "cfo", reports_to: "ceo" },
    ]);
  });
});

describe("generateGraph", () => {
  it("turns the governance documents into the fixture's graph", () => {
    const generated = generateGraph(csvDocuments, known);
    expect(generated.ok).toBe(true);
    if (!generated.ok) return;
    expect(indexGraph(generated.graph, 1)).toEqual(indexGraph(fixtureGraph(fixture), 1));
    expect(generated.warnings).toEqual([]);
  });

  it("reads the same graph from YAML and JSON documents", () => {
    const asRows = (doc: GovernanceDocument) => {
      const parsed = parseGovernanceDocument(doc);
      if (!parsed.ok) throw new Error("fixture document invalid");
      return parsed.rows.map(({ line: _line, ...fields }) => fields);
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

  it("reports problems only visible across documents at their file lines", () => {
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
      { document_id: "sched", line: 4, column: 3, field: "reports_to", code: "conflicting_reports_to" },
    ]);
    const fixed = [{ ...docs[0]!, content: "principal,role,reports_to\nE100,ceo,\nE999,cfo,ceo\n" }, docs[1]!];
    expect(errorsOf(generateGraph(fixed, known))).toEqual([
      { document_id: "sched", line: 3, column: 1, field: "principal", code: "unknown_principal" },
      { document_id: "doa", line: 4, column: 1, field: "holder", code: "unknown_role" },
      { document_id: "doa", line: 5, column: 2, field: "delegate", code: "self_delegation" },
    ]);
    // Amounts are compared once references are sound, so a missing role cannot look like an excess.
    const sound = [
      { ...docs[0]!, content: "principal,role,reports_to\nE100,ceo,\nE200,cfo,ceo\n" },
      { ...docs[1]!, content: (docs[1]!.content as string).split("\n").slice(0, 3).join("\n") },
    ];
    expect(errorsOf(generateGraph(sound, known))).toEqual([
      { document_id: "doa", line: 3, column: 5, field: "max_amount", code: "exceeds_holder_authority" },
    ]);
  });

  it("reports a role cycle at the line that closes it", () => {
    const docs: GovernanceDocument[] = [
      { document_id: "s", kind: "signing_schedule", format: "csv", content: "principal,role,reports_to\n,a,b\n,b,c\n,c,a\n" },
    ];
    expect(errorsOf(generateGraph(docs, known))).toEqual([{ document_id: "s", line: 2, column: 3, field: "reports_to", code: "role_cycle" }]);
  });

  it("reports parse errors of every document", () => {
    const docs: GovernanceDocument[] = [
      { document_id: "a", kind: "signing_schedule", format: "csv", content: "wrong\n" },
      { document_id: "b", kind: "approval_matrix", format: "csv", content: "action,currency,up_to_amount,approvals_required\nx,USD,1,11\n" },
    ];
    expect(errorsOf(generateGraph(docs, known))).toEqual([
      { document_id: "a", line: 1, column: 1, field: null, code: "invalid_header" },
      { document_id: "b", line: 2, column: 4, field: "approvals_required", code: "invalid_value" },
    ]);
  });
});

describe("generation warnings", () => {
  const warningsOf = (docs: GovernanceDocument[]) => {
    const generated = generateGraph(docs, known);
    if (!generated.ok) throw new Error(JSON.stringify(generated.errors));
    return generated.warnings;
  };
  const doa = (...rows: string[]): GovernanceDocument => ({
    document_id: "doc_doa",
    name: "doa.csv",
    kind: "delegation_of_authority",
    format: "csv",
    content: ["holder,delegate,action,currency,max_amount,valid_until", ...rows].join("\n"),
  });

  it("reports a delegation cycle at the delegation that closes it, per action and currency", () => {
    const warnings = warningsOf([
      doa(
        "E300,,vendor_payment,USD,1000,",
        "E700,,vendor_payment,EUR,100,",
        "E300,E700,vendor_payment,USD,500,",
        "E700,E900,vendor_payment,USD,450,",
        "E900,E300,vendor_payment,USD,400,",
        // Back again, but in another currency: no cycle of one grant.
        "E700,E300,vendor_payment,EUR,50,",
      ),
    ]);
    expect(warnings).toEqual([
      {
        code: "delegation_cycle",
        document_id: "doc_doa",
        line: 6,
        message: "delegations of vendor_payment in USD form a cycle: E300 → E700 → E900 → E300",
      },
    ]);
  });

  it("reports limits and delegations another row of the same grant covers, citing it by document name and line", () => {
    const warnings = warningsOf([
      doa(
        "E400,,vendor_payment,USD,5000,",
        "E400,,vendor_payment,USD,3000,",
        "E500,,vendor_payment,USD,2000,2026-12-31",
        "E500,,vendor_payment,USD,2500,",
        // Neither covers the other: more, but for less time.
        "E700,,vendor_payment,USD,1000,2027-06-30",
        "E700,,vendor_payment,USD,2000,2026-06-30",
        "E500,E900,vendor_payment,USD,100,",
        "E500,E900,vendor_payment,USD,100,",
        "E500,E960,vendor_payment,USD,100,",
      ),
    ]);
    expect(warnings.map(({ message: _m, ...w }) => w)).toEqual([
      { code: "shadowed_row", document_id: "doc_doa", line: 3 },
      { code: "shadowed_row", document_id: "doc_doa", line: 4 },
      { code: "shadowed_row", document_id: "doc_doa", line: 9 },
    ]);
    expect(warnings[0]!.message).toBe("the limit of E400 for vendor_payment of 3000 USD with no end never applies: doa.csv line 2 grants 5000 USD with no end");
    expect(warnings[1]!.message).toBe("the limit of E500 for vendor_payment of 2000 USD until 2026-12-31 never applies: doa.csv line 5 grants 2500 USD with no end");
    expect(warnings[2]!.message).toContain("the delegation from E500 to E900");
  });

  it("reports an approval band written after a larger one, and a membership stated twice", () => {
    const warnings = warningsOf([
      {
        document_id: "doc_schedule",
        name: "schedule.yaml",
        kind: "signing_schedule",
        format: "yaml",
        content: "- {principal: E100, role: ceo}\n- {principal: E200, role: cfo, reports_to: ceo}\n- {principal: E100, role: ceo}\n",
      },
      {
        document_id: "doc_matrix",
        name: "matrix.csv",
        kind: "approval_matrix",
        format: "csv",
        content: "action,currency,up_to_amount,approvals_required\nvendor_payment,USD,1000,0\nvendor_payment,USD,10000,1\nvendor_payment,USD,5000,2\nvendor_payment,EUR,500,0\n",
      },
    ]);
    expect(warnings).toEqual([
      { code: "shadowed_row", document_id: "doc_schedule", line: 3, message: 'E100 already holds role "ceo" (schedule.yaml line 1)' },
      {
        code: "shadowed_row",
        document_id: "doc_matrix",
        line: 4,
        message:
          "the band up to 5000 USD for vendor_payment comes after the band up to 10000 on matrix.csv line 3, which covers it when the matrix is read top to bottom; bands apply in ascending order of up_to_amount",
      },
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
