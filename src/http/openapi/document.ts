import { type ApiVersion, hasMetadata } from '../../processing/file-result.js';
import { apiPaths } from './operations.js';
import { componentSchemas } from './schemas.js';
import type { OpenApiDocument } from './types.js';

export interface DescriptorOptions {
  version: ApiVersion;
  /** The configured public URL; without it, servers are relative to the descriptor's own URL. */
  publicUrl: string | null;
  maxFileSize: number;
  /** Brand word of the host and request id headers (`X-<Brand>-Request-Id`). */
  headerBrand: string;
}

const ABOUT: Record<ApiVersion, string> = {
  'v2.0': 'v2.0: files, temporary tokens and ping; no metadata, no account resource.',
  'v2.1': 'v2.1: v2.0 plus `metadata[key]` arguments, the `metadata` field and the account.',
  'v2.2':
    'v2.2: v2.1 plus a remote `location` on the synchronous POST /files and the trace of an item.',
};

function describeService(options: DescriptorOptions): string {
  const brand = options.headerBrand;
  return [
    'Assay is a self-hosted content processing service: submit content, get back a persistent ' +
      'result with everything the engines found (malware, nude images, obscene language).',
    '',
    ABOUT[options.version],
    '',
    '- Authentication: HTTP Basic on every operation, with an API key id and its secret, or a ' +
      'temporary token id and an empty password.',
    '- Responses are JSON. Errors are `{"error": "<message>"}` with `Content-Type: application/json`.',
    '- Dates are ISO 8601 in UTC with a `Z`: milliseconds for items and tokens, seconds for the ' +
      'account.',
    `- Every response carries \`X-Runtime\` (\`<n>ms\`), \`X-${brand}-Host-Id\`, ` +
      `\`X-${brand}-Request-Id\` (a UUID, to quote when reporting a problem) and CORS headers ` +
      '(`Access-Control-Allow-Origin: *`); `OPTIONS` answers without credentials.',
    '- Every path answers the same with or without one trailing slash (`/auth/tokens/` is ' +
      '`/auth/tokens`). A request with a known path and the wrong method gets 405 with `Allow`; ' +
      'an unknown path 404.',
  ].join('\n');
}

/** The OpenAPI 3.1 descriptor of one API version, as plain JSON. */
export function buildDescriptor(options: DescriptorOptions): OpenApiDocument {
  const { version } = options;
  const document: OpenApiDocument = {
    openapi: '3.1.1',
    info: {
      title: 'Assay content processing API',
      version: version.slice(1),
      summary: `Scan content for malware and unwanted material (API ${version}).`,
      description: describeService(options),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      {
        url: options.publicUrl === null ? `/${version}` : `${options.publicUrl}/${version}`,
        description: 'This service.',
      },
    ],
    security: [{ basicAuth: [] }],
    tags: [
      { name: 'Files', description: 'Submit content and read its results.' },
      { name: 'Tokens', description: 'Temporary credentials for untrusted clients.' },
      ...(version === 'v2.0' ? [] : [{ name: 'Account', description: 'The account (beta).' }]),
      { name: 'Service', description: 'Checking credentials.' },
    ],
    paths: apiPaths({ version, maxFileSize: options.maxFileSize }),
    components: {
      securitySchemes: {
        basicAuth: {
          type: 'http',
          scheme: 'basic',
          description:
            'User name: an API key id (32 hex characters), password: its secret. Or user name: ' +
            'a temporary token id, password: empty.',
        },
      },
      schemas: componentSchemas(hasMetadata(version), version !== 'v2.0', version === 'v2.2'),
      responses: {
        Unauthorized: {
          description:
            'Missing or malformed credentials, a wrong secret, a disabled key, or an expired or ' +
            'deleted token.',
          headers: {
            'WWW-Authenticate': {
              description: 'The Basic challenge, e.g. `Basic realm="Assay", charset="UTF-8"`.',
              required: true,
              schema: { type: 'string' },
            },
          },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
        RateLimited: {
          description: 'Too many requests: wait `Retry-After` seconds and try again.',
          headers: {
            'Retry-After': { $ref: '#/components/headers/RetryAfter' },
            'x-ratelimit-limit': { $ref: '#/components/headers/RateLimitLimit' },
            'x-ratelimit-remaining': { $ref: '#/components/headers/RateLimitRemaining' },
          },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
        EngineUnavailable: {
          description:
            'An engine could not scan the content, or the service is already running as many ' +
            'synchronous scans as it may; nothing was processed and nothing is reported clean. ' +
            'Try again after `Retry-After` seconds.',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
      headers: {
        Location: {
          description: 'Absolute URL of the created resource.',
          required: true,
          schema: { type: 'string', format: 'uri' },
        },
        RetryAfter: {
          description: 'Seconds to wait before trying again.',
          required: true,
          schema: { type: 'integer', minimum: 0 },
        },
        RateLimitLimit: {
          description: 'Requests the credentials may make in the current window.',
          schema: { type: 'integer', minimum: 0 },
        },
        RateLimitRemaining: {
          description: 'Requests left in the current window.',
          schema: { type: 'integer', minimum: 0 },
        },
      },
    },
  };
  // TypeBox marks its schemas with symbol keys; a JSON round trip leaves the plain document.
  return JSON.parse(JSON.stringify(document)) as OpenApiDocument;
}
