import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type {
  OpenApiDocument,
  Operation,
  Reference,
  Response,
} from '../../src/http/openapi/types.js';

/** Where a descriptor's named schemas live in the test's validator, as `$defs`. */
const DEFS_ID = 'urn:assay:descriptor';

const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

/** `#/components/schemas/X` becomes a reference into the `$defs` document of the validator. */
function relocate<T>(value: T): T {
  return JSON.parse(
    JSON.stringify(value).replaceAll('"#/components/schemas/', `"${DEFS_ID}#/$defs/`),
  ) as T;
}

function newAjv(): Ajv2020 {
  // strictSchema stays on: an unknown keyword or a malformed schema is an error, not a warning.
  const ajv = new Ajv2020({
    strict: true,
    strictTypes: false,
    strictRequired: false,
    allErrors: true,
  });
  ajv.addFormat('date-time', DATE_TIME);
  ajv.addFormat('uri', (value: string) => URL.canParse(value));
  return ajv;
}

/** Every JSON Schema the document carries, named by where it is. */
function schemasOf(document: OpenApiDocument): Array<[string, object]> {
  const found: Array<[string, object]> = [];
  for (const [name, schema] of Object.entries(document.components.schemas)) {
    found.push([`components.schemas.${name}`, schema]);
  }
  for (const [name, header] of Object.entries(document.components.headers)) {
    found.push([`components.headers.${name}`, header.schema]);
  }
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item) as Array<[string, Operation]>) {
      const where = `${method.toUpperCase()} ${path}`;
      for (const parameter of operation.parameters ?? []) {
        found.push([`${where} parameter ${parameter.name}`, parameter.schema]);
      }
      for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
        found.push([`${where} request ${type}`, media.schema]);
      }
      for (const [status, response] of Object.entries(operation.responses)) {
        if ('$ref' in response) continue; // checked under components
        for (const [type, media] of Object.entries(response.content ?? {})) {
          found.push([`${where} ${status} ${type}`, media.schema]);
        }
      }
    }
  }
  return found;
}

/**
 * Problems of a descriptor: the OpenAPI 3.1 structure (a real validator), then every schema in it
 * compiled as JSON Schema 2020-12 (which that validator leaves unchecked). Empty when it is sound.
 */
export async function descriptorProblems(document: unknown): Promise<string[]> {
  const validator = new Validator();
  const result = await validator.validate(document as Record<string, unknown>);
  if (!result.valid) return [`not OpenAPI: ${JSON.stringify(result.errors)}`];
  if (validator.version !== '3.1') return [`OpenAPI ${validator.version}, not 3.1`];
  const typed = document as OpenApiDocument;
  const ajv = newAjv();
  const problems: string[] = [];
  try {
    ajv.addSchema(relocate({ $id: DEFS_ID, $defs: typed.components.schemas }));
  } catch (error) {
    return [`components.schemas: ${String(error)}`];
  }
  for (const [where, schema] of schemasOf(typed)) {
    try {
      ajv.compile(relocate(schema));
    } catch (error) {
      problems.push(`${where}: ${String(error)}`);
    }
  }
  return problems;
}

function resolveResponse(document: OpenApiDocument, value: Response | Reference): Response {
  if (!('$ref' in value)) return value;
  const name = value.$ref.replace('#/components/responses/', '');
  const response = document.components.responses[name];
  if (response === undefined) throw new Error(`no response ${value.$ref}`);
  return response;
}

/**
 * Checks a real response against what the descriptor documents for it: the status is listed, the
 * JSON body matches its schema, required headers are there and integer headers are integers.
 */
export async function checkResponse(
  document: OpenApiDocument,
  method: string,
  path: string,
  response: globalThis.Response,
): Promise<string[]> {
  const operation = document.paths[path]?.[method as 'get' | 'post' | 'delete'];
  if (operation === undefined) return [`${method} ${path} is not in the descriptor`];
  const documented = operation.responses[String(response.status)];
  if (documented === undefined)
    return [`${method} ${path}: status ${response.status} undocumented`];
  const expected = resolveResponse(document, documented);
  const problems: string[] = [];
  const ajv = newAjv();
  ajv.addSchema(relocate({ $id: DEFS_ID, $defs: document.components.schemas }));
  for (const [name, value] of Object.entries(expected.headers ?? {})) {
    const header =
      '$ref' in value
        ? document.components.headers[value.$ref.replace('#/components/headers/', '')]
        : value;
    const actual = response.headers.get(name);
    if (actual === null) {
      if (header?.required === true) problems.push(`header ${name} missing`);
    } else if (header?.schema.type === 'integer' && !/^\d+$/.test(actual)) {
      problems.push(`header ${name} is not an integer: ${actual}`);
    }
  }
  const schema = expected.content?.['application/json']?.schema;
  const text = await response.text();
  if (schema === undefined) {
    if (text !== '') problems.push(`a body where none is documented: ${text}`);
    return problems;
  }
  if (response.headers.get('content-type') !== 'application/json') {
    problems.push(`content-type ${response.headers.get('content-type')}`);
  }
  const validate = ajv.compile(relocate(schema));
  if (!validate(JSON.parse(text))) {
    problems.push(`body ${text} does not match: ${ajv.errorsText(validate.errors)}`);
  }
  return problems;
}
