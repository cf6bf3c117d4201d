import { z } from 'zod';
import { AUDIT_LINE_SCHEMAS, AUDIT_LINE_TYPES, type AuditLineType } from './audit-line-schema.js';

/**
 * The audit log's lines as the audit schema page documents them: each type's fields, with
 * their JSON types and descriptions, read from the schemas themselves (audit-line-schema.ts),
 * so the page cannot drift from what is written and read.
 */

/** A field of a line as the audit schema page lists it. */
export interface AuditFieldDoc {
  name: string;
  /** The JSON type(s) or the values allowed, e.g. `string | null`, `"ok" | "error"`. */
  type: string;
  /** Absent from some lines (written before it existed, or only when it applies). */
  optional: boolean;
  description: string;
}

/** Every line type with its description and its fields (the head included), from the schemas above: the page of the audit schema lists these. */
export function auditLineFields(): { type: AuditLineType; description: string; fields: AuditFieldDoc[] }[] {
  return AUDIT_LINE_TYPES.map((type) => {
    const schema = z.toJSONSchema(AUDIT_LINE_SCHEMAS[type], { io: 'input', unrepresentable: 'any' }) as JsonSchema;
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties ?? {}).map(([name, field]) => ({
      name,
      type: typeText(field),
      optional: !required.has(name),
      description: field.description ?? '',
    }));
    return { type, description: schema.description ?? '', fields };
  });
}

interface JsonSchema {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  description?: string;
}

function typeText(schema: JsonSchema): string {
  if (schema.anyOf) return schema.anyOf.map(typeText).join(' | ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (schema.type === 'array') return `${schema.items ? typeText(schema.items) : 'any'}[]`;
  if (schema.type === 'object' && schema.properties) {
    return `{ ${Object.entries(schema.properties)
      .map(([k, v]) => `${k}${schema.required?.includes(k) ? '' : '?'}: ${typeText(v)}`)
      .join(', ')} }`;
  }
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  return schema.type ?? 'any JSON';
}
