-- Declared types of Intent fields, by field path ({"amount": {"type": "number", "required":
-- true}, "context.tier": {"type": "enum", "values": ["a", "b"]}}): the Intent path refuses an
-- Intent whose declared field is missing (when required) or of another type. Versions proposed
-- before this column existed declare none.
ALTER TABLE contract_versions ADD COLUMN field_types jsonb NOT NULL DEFAULT '{}';
