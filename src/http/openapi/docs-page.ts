import type { ApiVersion } from '../../processing/file-result.js';
import {
  isReference,
  type JsonSchema,
  type Method,
  type OpenApiDocument,
  type Operation,
  type Reference,
  type Response,
} from './types.js';

/**
 * The human-readable API reference, rendered on the server from the descriptor itself, so the two
 * cannot disagree. One self-contained page: no scripts, no fonts or styles from elsewhere.
 */

const METHODS: readonly Method[] = ['get', 'post', 'delete'];

const STYLE = `
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem 1.5rem;color:#1d1d1f}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #ddd;margin-top:2.5rem}
h3{margin:2rem 0 .3rem;font-family:ui-monospace,monospace;font-size:1.05rem}
code{font-family:ui-monospace,monospace;background:#f2f2f4;padding:0 .25rem;border-radius:3px}
div.table{overflow-x:auto;margin:.4rem 0 1rem}table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f7f7f9}.method{display:inline-block;min-width:4.2rem;color:#fff;border-radius:3px;
text-align:center;margin-right:.4rem}.get{background:#2b6cb0}.post{background:#2f855a}
.delete{background:#c53030}nav a{margin-right:1rem}.muted{color:#666}
section.operation{border-left:3px solid #ddd;padding-left:1rem}td p{margin:0}
@media (max-width:40rem){body{padding:1rem}section.operation{padding-left:.6rem}
div.table table,div.table tbody,div.table tr,div.table td{display:block}
div.table thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
div.table tr{border:1px solid #ddd;border-bottom:0;padding:.3rem 0}div.table tr:last-child{border-bottom:1px solid #ddd}
div.table td{border:0;padding:.1rem .5rem;overflow-wrap:anywhere}div.table td::before{content:attr(data-label) ": ";font-weight:600}}`;

function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** The little Markdown the descriptor's texts use: `code`, "- " lists and paragraphs. */
function prose(text: string): string {
  const inline = (line: string) => escapeHtml(line).replace(/`([^`]+)`/g, '<code>$1</code>');
  const blocks: string[] = [];
  let list: string[] = [];
  const flush = () => {
    if (list.length > 0) blocks.push(`<ul>${list.map((item) => `<li>${item}</li>`).join('')}</ul>`);
    list = [];
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('- ')) list.push(inline(line.slice(2)));
    else {
      flush();
      if (line.trim() !== '') blocks.push(`<p>${inline(line)}</p>`);
    }
  }
  flush();
  return blocks.join('\n');
}

function table(headings: string[], rows: string[][]): string {
  if (rows.length === 0) return '';
  const head = headings.map((heading) => `<th role="columnheader">${heading}</th>`).join('');
  const body = rows.map(
    (row) =>
      `<tr role="row">${row.map((cell, index) => `<td role="cell" data-label="${escapeHtml(headings[index] ?? '')}">${cell}</td>`).join('')}</tr>`,
  );
  // On a phone each row is a card of "heading: value" lines (STYLE), never wider than the page;
  // roles are written out because a browser may drop a table's once it is not laid out as one.
  return `<div class="table"><table role="table"><thead role="rowgroup"><tr role="row">${head}</tr></thead><tbody role="rowgroup">${body.join('')}</tbody></table></div>`;
}

const schemaName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);

/** A schema as a short type expression; named schemas link to their section. */
function typeOf(schema: JsonSchema): string {
  if (typeof schema.$ref === 'string') {
    const name = schemaName(schema.$ref);
    return `<a href="#schema-${name}">${name}</a>`;
  }
  const alternatives = (schema.oneOf ?? schema.anyOf) as JsonSchema[] | undefined;
  if (alternatives?.every((alternative) => 'type' in alternative || '$ref' in alternative)) {
    return alternatives.map(typeOf).join(' or ');
  }
  if ('const' in schema) return `<code>${escapeHtml(JSON.stringify(schema.const))}</code>`;
  if (schema.type === 'array') return `array of ${typeOf((schema.items ?? {}) as JsonSchema)}`;
  if (schema.type === 'object' && typeof schema.additionalProperties === 'object') {
    return `object: string → ${typeOf(schema.additionalProperties as JsonSchema)}`;
  }
  if (schema.type === 'object' && schema.properties !== undefined) {
    const fields = Object.keys(schema.properties as object).map((name) => `<code>${name}</code>`);
    return `object {${fields.join(', ')}}`;
  }
  const facets: string[] = [];
  if (typeof schema.format === 'string') facets.push(schema.format);
  if (typeof schema.contentMediaType === 'string') facets.push('binary');
  if (typeof schema.minimum === 'number' && typeof schema.maximum === 'number') {
    facets.push(`${schema.minimum}..${schema.maximum}`);
  }
  if (schema.default !== undefined) facets.push(`default ${JSON.stringify(schema.default)}`);
  const type = typeof schema.type === 'string' ? schema.type : 'any';
  return facets.length === 0 ? type : `${type} (${escapeHtml(facets.join(', '))})`;
}

/** Rows of an object schema: properties, then pattern properties under their title. */
function fieldRows(schema: JsonSchema): string[][] {
  const required = new Set((schema.required ?? []) as string[]);
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const patterns = (schema.patternProperties ?? {}) as Record<string, JsonSchema>;
  const row = (name: string, field: JsonSchema, isRequired: boolean) => [
    `<code>${escapeHtml(name)}</code>`,
    typeOf(field),
    isRequired ? 'yes' : 'no',
    prose(String(field.description ?? '')),
  ];
  return [
    ...Object.entries(properties).map(([name, field]) => row(name, field, required.has(name))),
    ...Object.entries(patterns).map(([pattern, field]) =>
      row(String(field.title ?? pattern), field, false),
    ),
  ];
}

function fieldTable(schema: JsonSchema): string {
  const rows = fieldRows(schema);
  const choice = (schema.oneOf as JsonSchema[] | undefined)
    ?.map((branch) => ((branch.required ?? []) as string[]).map((n) => `<code>${n}</code>`))
    .map((names) => names.join(' and '));
  const note = choice === undefined ? '' : `<p>Exactly one of: ${choice.join(', ')}.</p>`;
  return table(['field', 'type', 'required', 'description'], rows) + note;
}

function resolve<T extends object>(document: OpenApiDocument, value: T | Reference): T {
  if (!isReference(value)) return value;
  const [, , section, name] = value.$ref.split('/');
  const components = document.components as unknown as Record<string, Record<string, T>>;
  const target =
    section === undefined || name === undefined ? undefined : components[section]?.[name];
  if (target === undefined) throw new Error(`unresolved reference ${value.$ref}`);
  return target;
}

function responsesOf(document: OpenApiDocument, operation: Operation): string {
  const rows = Object.entries(operation.responses).map(([status, value]) => {
    const response = resolve<Response>(document, value);
    const headers = Object.entries(response.headers ?? {}).map(([name, header]) => {
      const resolved = resolve(document, header);
      return `<code>${escapeHtml(name)}</code>: ${typeOf(resolved.schema)}`;
    });
    const body = response.content?.['application/json']?.schema;
    return [
      `<strong>${status}</strong>`,
      prose(response.description),
      body === undefined ? '<span class="muted">none</span>' : typeOf(body),
      headers.join('<br>'),
    ];
  });
  return table(['status', 'meaning', 'body', 'headers'], rows);
}

function operationSection(
  document: OpenApiDocument,
  path: string,
  method: Method,
  operation: Operation,
): string {
  const server = document.servers[0]?.url ?? '';
  const security = (operation.security ?? document.security)
    .flatMap((requirement) => Object.keys(requirement))
    .map((name) => `<a href="#security-${name}">${name}</a> (HTTP Basic)`);
  const parameters = (operation.parameters ?? []).map((parameter) => [
    `<code>${escapeHtml(parameter.name)}</code>`,
    parameter.in,
    typeOf(parameter.schema),
    prose(parameter.description),
  ]);
  const body = operation.requestBody;
  const bodyHtml =
    body === undefined
      ? ''
      : Object.entries(body.content)
          .map(
            ([type, media]) =>
              `<h4>Request body: <code>${type}</code>${body.required ? '' : ' (optional)'}</h4>` +
              prose(body.description) +
              fieldTable(media.schema),
          )
          .join('');
  return `<section class="operation" id="${operation.operationId}">
<h3><span class="method ${method}">${method.toUpperCase()}</span>${escapeHtml(server + path)}</h3>
<p><strong>${escapeHtml(operation.summary)}</strong> <span class="muted">(${operation.operationId})</span></p>
${prose(operation.description)}
<p>Security: ${security.length === 0 ? 'none' : security.join(', ')}</p>
${parameters.length === 0 ? '' : `<h4>Parameters</h4>${table(['name', 'in', 'type', 'description'], parameters)}`}
${bodyHtml}
<h4>Responses</h4>
${responsesOf(document, operation)}
</section>`;
}

function schemaSection(name: string, schema: JsonSchema): string {
  const nested = Object.entries((schema.properties ?? {}) as Record<string, JsonSchema>)
    .filter(([, field]) => typeof field.additionalProperties === 'object')
    .map(
      ([field, map]) =>
        `<p>Each value of <code>${field}</code>:</p>${fieldTable(map.additionalProperties as JsonSchema)}`,
    );
  return `<section id="schema-${name}"><h3>${name}</h3>${prose(String(schema.description ?? ''))}
${fieldTable(schema)}${nested.join('')}</section>`;
}

const UNVERSIONED_ROUTES = [
  ['GET /health/live', 'Liveness: the process answers. No credentials.'],
  [
    'GET /health/ready',
    'Readiness: 200 when the store and the malware engine answer, else 503; engine and ' +
      'signature versions. No credentials.',
  ],
  [
    'GET /metrics',
    'Metrics in the Prometheus text format. No API credentials: open, or the bearer token of ' +
      'ASSAY_METRICS_TOKEN.',
  ],
  [
    'GET /static/eicar.txt, /static/samples/{malware,language.txt,image.jpg}',
    'Test content that each engine flags, to submit by URL. No credentials.',
  ],
  ['GET /v2.x/openapi.json, /v2.x/openapi.yaml', 'The OpenAPI 3.1 descriptor. No credentials.'],
  ['GET /docs, /docs/v2.x', 'This page. No credentials.'],
  ['GET /favicon.svg', 'The icon of this page and the console. No credentials.'],
];

/** The whole reference page of one version; `versions` are linked from its header. */
export function renderDocsPage(
  document: OpenApiDocument,
  version: ApiVersion,
  versions: readonly ApiVersion[],
): string {
  const operations = Object.entries(document.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      return operation === undefined ? [] : [{ path, method, operation }];
    }),
  );
  const groups = document.tags.map((tag) => {
    const members = operations.filter(({ operation }) => operation.tags.includes(tag.name));
    const sections = members.map(({ path, method, operation }) =>
      operationSection(document, path, method, operation),
    );
    return `<h2 id="tag-${tag.name}">${tag.name}</h2>${prose(tag.description)}${sections.join('\n')}`;
  });
  const contents = operations.map(
    ({ path, method, operation }) =>
      `<li><a href="#${operation.operationId}">${method.toUpperCase()} ${escapeHtml(path)}</a>: ${escapeHtml(operation.summary)}</li>`,
  );
  const security = Object.entries(document.components.securitySchemes).map(
    ([name, scheme]) =>
      `<section id="security-${name}"><h3>${name}: HTTP ${scheme.scheme}</h3>${prose(scheme.description)}</section>`,
  );
  const schemas = Object.entries(document.components.schemas).map(([name, schema]) =>
    schemaSection(name, schema),
  );
  const versionLinks = versions.map((other) =>
    other === version ? `<strong>${other}</strong>` : `<a href="/docs/${other}">${other}</a>`,
  );
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(document.info.title)} ${version}</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml"><style>${STYLE}</style></head>
<body>
<h1>${escapeHtml(document.info.title)} <span class="muted">${version}</span></h1>
<nav>Versions: ${versionLinks.join(' ')} · Descriptor:
<a href="/${version}/openapi.json">openapi.json</a> <a href="/${version}/openapi.yaml">openapi.yaml</a></nav>
${prose(document.info.description)}
<h2>Operations</h2><ul>${contents.join('')}</ul>
<h2 id="security">Authentication</h2>${security.join('')}
${groups.join('\n')}
<h2 id="schemas">Schemas</h2>${schemas.join('\n')}
<h2 id="unversioned">Outside the versioned API</h2>
${table(
  ['route', 'what'],
  UNVERSIONED_ROUTES.map(([route, what]) => [
    `<code>${escapeHtml(route ?? '')}</code>`,
    escapeHtml(what ?? ''),
  ]),
)}
</body></html>
`;
}
