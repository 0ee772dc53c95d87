import { existsSync } from 'node:fs';

import { jobSchemaPath, loadJobSchema } from './job-schema.js';

type SchemaNode = Record<string, unknown>;

/** Every object schema (with its location) reachable through the keywords this schema uses. */
function objectSchemas(node: unknown, where = '#'): [string, SchemaNode][] {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return [];
  const schema = node as SchemaNode;
  const found: [string, SchemaNode][] =
    schema['type'] === 'object' || schema['properties'] !== undefined ? [[where, schema]] : [];
  for (const keyword of ['properties', 'definitions']) {
    const children = schema[keyword] as Record<string, unknown> | undefined;
    for (const [name, child] of Object.entries(children ?? {}))
      found.push(...objectSchemas(child, `${where}/${keyword}/${name}`));
  }
  for (const keyword of ['items', 'then', 'else']) found.push(...objectSchemas(schema[keyword], `${where}/${keyword}`));
  for (const [i, child] of ((schema['allOf'] as unknown[] | undefined) ?? []).entries()) {
    found.push(...objectSchemas(child, `${where}/allOf/${i}`));
  }
  return found;
}

function propertySchemas(schema: SchemaNode, where = '#'): [string, SchemaNode][] {
  const out: [string, SchemaNode][] = [];
  const visit = (node: unknown, path: string): void => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return;
    const s = node as SchemaNode;
    for (const [name, child] of Object.entries((s['properties'] as Record<string, SchemaNode> | undefined) ?? {})) {
      out.push([`${path}/properties/${name}`, child]);
      visit(child, `${path}/properties/${name}`);
    }
    for (const [name, child] of Object.entries((s['definitions'] as Record<string, SchemaNode> | undefined) ?? {})) {
      visit(child, `${path}/definitions/${name}`);
    }
    for (const keyword of ['items', 'then', 'else']) visit(s[keyword], `${path}/${keyword}`);
    for (const [i, child] of ((s['allOf'] as unknown[] | undefined) ?? []).entries())
      visit(child, `${path}/allOf/${i}`);
  };
  visit(schema, where);
  return out;
}

describe('job schema', () => {
  it('job schema - is found from the library folder', () => {
    expect(jobSchemaPath()).toMatch(/proto[\\/]job\.schema\.json$/);
    expect(existsSync(jobSchemaPath())).toBe(true);
    expect(loadJobSchema()['title']).toBe('Tributary job spec');
  });

  it('job schema - every property has a description or points to a definition that has one', () => {
    const schema = loadJobSchema();
    const definitions = schema['definitions'] as Record<string, SchemaNode>;
    const undocumented = propertySchemas(schema)
      .filter(([, property]) => {
        const ref = property['$ref'];
        const target = typeof ref === 'string' ? definitions[ref.replace('#/definitions/', '')] : property;
        return typeof target?.['description'] !== 'string' || target['description'] === '';
      })
      .map(([where]) => where);
    expect(undocumented).toEqual([]);
  });

  it('job schema - every object with declared fields refuses unknown ones', () => {
    const open = objectSchemas(loadJobSchema())
      .filter(([, schema]) => schema['properties'] !== undefined && schema['additionalProperties'] !== false)
      .map(([where]) => where);
    // The model, the optimizer and its schedule dispatch on preset/type to branches that close them.
    expect(open).toEqual(['#/definitions/model/else', '#/definitions/optimizer', '#/definitions/learningRateSchedule']);
  });
});
