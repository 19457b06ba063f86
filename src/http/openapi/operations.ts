import { TOKEN_TIMEOUT } from '../../accounts/account-service.js';
import { type ApiVersion, hasMetadata } from '../../processing/file-result.js';
import {
  MAX_CALLBACK_BODY_BYTES,
  MAX_CALLBACK_METADATA_BYTES,
} from '../../processing/result-recorder.js';
import type { JsonSchema, Operation, PathItem, Reference, Response } from './types.js';

/** What the operations need to know about the service they describe. */
export interface OperationContext {
  version: ApiVersion;
  maxFileSize: number;
}

const schemaRef = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const responseRef = (name: string): Reference => ({ $ref: `#/components/responses/${name}` });
const headerRef = (name: string): Reference => ({ $ref: `#/components/headers/${name}` });

const RATE_LIMIT_HEADERS = {
  'x-ratelimit-limit': headerRef('RateLimitLimit'),
  'x-ratelimit-remaining': headerRef('RateLimitRemaining'),
};

function success(description: string, schema: JsonSchema | null, location = false): Response {
  return {
    description,
    headers: { ...(location ? { Location: headerRef('Location') } : {}), ...RATE_LIMIT_HEADERS },
    ...(schema === null ? {} : { content: { 'application/json': { schema } } }),
  };
}

function failure(description: string): Response {
  return { description, content: { 'application/json': { schema: schemaRef('Error') } } };
}

const TOKEN_REFUSED = failure(
  'A temporary token was used: this resource needs an API key and its secret.',
);
const BALANCE_SPENT = failure(
  'The account enforces its balance and has no credit left for this item (each item takes one ' +
    'when it is accepted), or the key has no detection category enabled: nothing was processed ' +
    'or kept.',
);

/** Every operation needs credentials: each may answer 401 and 429. */
function authenticated(operation: Operation): Operation {
  return {
    ...operation,
    responses: {
      ...operation.responses,
      '401': responseRef('Unauthorized'),
      '429': responseRef('RateLimited'),
    },
  };
}

const idParameter = (what: string) => ({
  name: 'id',
  in: 'path' as const,
  required: true,
  description: `Id of the ${what}, as returned when it was created.`,
  schema: { type: 'string', pattern: '^[0-9a-f]{32}$' },
});

const callbackField = {
  type: 'string',
  format: 'uri',
  description:
    'An http or https URL that receives the result by POST once processing completes ' +
    '(the body of GET /files/{id}; retried until it answers 2xx). A callback body is at most ' +
    `${MAX_CALLBACK_BODY_BYTES} bytes: with a callback, metadata may take at most ` +
    `${MAX_CALLBACK_METADATA_BYTES} bytes as JSON (400 otherwise).`,
};

const metadataFields = {
  '^metadata\\[.+\\]$': {
    type: 'string',
    title: 'metadata[<key>]',
    description:
      'Any number of `metadata[<key>]=<value>` arguments, stored with the item and returned in ' +
      '`metadata` (keys trimmed; at most 100 entries, keys of 1 to 256 characters).',
  },
};

/** Fields of an upload form: `file`, `callback`, `metadata[key]` (v2.1+), `location` (sync, v2.2). */
function uploadForm(context: OperationContext, withLocation: boolean): JsonSchema {
  const file = {
    type: 'string',
    contentMediaType: 'application/octet-stream',
    description: `The content to process, at most ${context.maxFileSize} bytes.`,
  };
  const location = {
    type: 'string',
    format: 'uri',
    description:
      'Instead of `file`: an http or https URL whose content the service downloads and ' +
      'processes before answering. A plain text field, not URL-encoded.',
  };
  return {
    type: 'object',
    properties: { file, ...(withLocation ? { location } : {}), callback: callbackField },
    ...(hasMetadata(context.version) ? { patternProperties: metadataFields } : {}),
    ...(withLocation
      ? { oneOf: [{ required: ['file'] }, { required: ['location'] }] }
      : { required: ['file'] }),
  };
}

function createFile(context: OperationContext): Operation {
  const withLocation = context.version === 'v2.2';
  const remote: Record<string, Response> = withLocation
    ? {
        '502': failure('`location`: the download failed (unreachable, error status, empty).'),
      }
    : {};
  return {
    operationId: 'createFile',
    summary: 'Process content and wait for the result',
    description:
      'Processes the uploaded content synchronously and answers with its result once every ' +
      'engine has given its verdict.' +
      (withLocation ? ' Takes either a `file` part or a `location` to download.' : ''),
    tags: ['Files'],
    requestBody: {
      description: 'A multipart form; the `file` part may come before or after the text fields.',
      required: true,
      content: { 'multipart/form-data': { schema: uploadForm(context, withLocation) } },
    },
    responses: {
      '201': success(
        'Processed; `Location` is the URL of the result.',
        schemaRef('FileResult'),
        true,
      ),
      '400': failure(
        withLocation
          ? 'Not multipart, no content, both `file` and `location`, empty content, a bad ' +
              '`callback`, `location` or metadata, or a `location` the service may not reach.'
          : 'Not multipart, no `file` part, empty content, a bad `callback` or metadata.',
      ),
      '403': BALANCE_SPENT,
      '413': failure(`The content is larger than ${context.maxFileSize} bytes.`),
      '422': failure(
        'An enabled engine could not decide (a corrupt image, an image over the pixel limit, a ' +
          'document past the size or time caps): nothing is recorded, and retrying will not help.',
      ),
      ...remote,
      '503': responseRef('EngineUnavailable'),
    },
  };
}

function createFileAsync(context: OperationContext): Operation {
  return {
    operationId: 'createFileAsync',
    summary: 'Process content in the background',
    description:
      'Answers 202 once the content is stored and the work is committed. The result follows ' +
      'by GET /files/{id} (404 until it is ready) and by `callback`.',
    tags: ['Files'],
    requestBody: {
      description: 'A multipart form with the content as the `file` part.',
      required: true,
      content: { 'multipart/form-data': { schema: uploadForm(context, false) } },
    },
    responses: {
      '202': success(
        'Accepted; `Location` is the URL of the future result.',
        schemaRef('Acknowledgement'),
        true,
      ),
      '400': failure('Not multipart, no `file` part, empty content, a bad `callback` or metadata.'),
      '403': BALANCE_SPENT,
      '413': failure(`The content is larger than ${context.maxFileSize} bytes.`),
    },
  };
}

function fetchFile(context: OperationContext): Operation {
  return {
    operationId: 'fetchFile',
    summary: 'Download content from a URL and process it in the background',
    description:
      'Answers 202 at once, without waiting for the remote host. When the download fails, the ' +
      'item is still finished: GET /files/{id} answers 200 with an `error` and no `findings`.',
    tags: ['Files'],
    requestBody: {
      description: 'A URL-encoded form.',
      required: true,
      content: {
        'application/x-www-form-urlencoded': {
          schema: {
            type: 'object',
            properties: {
              location: {
                type: 'string',
                format: 'uri',
                description: 'The http or https URL of the content (URL-encoded in the form).',
              },
              callback: callbackField,
            },
            ...(hasMetadata(context.version) ? { patternProperties: metadataFields } : {}),
            required: ['location'],
          },
        },
      },
    },
    responses: {
      '202': success(
        'Accepted; `Location` is the URL of the future result.',
        schemaRef('Acknowledgement'),
        true,
      ),
      '400': failure('Not a URL-encoded form, no `location`, or a bad URL or metadata.'),
      '403': BALANCE_SPENT,
    },
  };
}

const getFile: Operation = {
  operationId: 'getFile',
  summary: 'Get the result of an item',
  description:
    "The stored result of an item of the caller's account. An item whose content could not be " +
    'had (a failed download) answers 200 with an `error` instead of `findings`.',
  tags: ['Files'],
  parameters: [idParameter('item')],
  responses: {
    '200': success('The result.', { oneOf: [schemaRef('FileResult'), schemaRef('FailedItem')] }),
    '404': failure("No such item, not finished yet, or another account's: poll again later."),
  },
};

const getTrace: Operation = {
  operationId: 'getFileTrace',
  summary: 'Get what happened to an item',
  description:
    "Events so far, finished or not: received, downloaded, each engine's verdict, processed, " +
    'each callback attempt.',
  tags: ['Files'],
  parameters: [idParameter('item')],
  responses: {
    '200': success('The events.', schemaRef('Trace')),
    '404': failure("No such item, or another account's."),
  },
};

const ping: Operation = {
  operationId: 'ping',
  summary: 'Check credentials',
  description: 'Answers `pong` with the id of the key or token that authenticated.',
  tags: ['Service'],
  responses: { '200': success('The credentials are good.', schemaRef('Ping')) },
};

function createToken(operationId: string, note: string): Operation {
  return {
    operationId,
    summary: 'Create a temporary token',
    description:
      'A token lets an untrusted client (a browser page) authenticate without the secret: HTTP ' +
      'Basic with the token id as user name and an empty password. It may process content and ' +
      `read results, not manage tokens or read the account. API keys only.${note}`,
    tags: ['Tokens'],
    requestBody: {
      description: 'A URL-encoded form; may be empty.',
      required: false,
      content: {
        'application/x-www-form-urlencoded': {
          schema: {
            type: 'object',
            properties: {
              timeout: {
                type: 'integer',
                minimum: TOKEN_TIMEOUT.min,
                maximum: TOKEN_TIMEOUT.max,
                default: TOKEN_TIMEOUT.default,
                description: 'Seconds until the token expires.',
              },
            },
          },
        },
      },
    },
    responses: {
      '201': success('Created; `Location` is the URL of the token.', schemaRef('Token'), true),
      '400': failure(
        `\`timeout\` is not a whole number of seconds from ${TOKEN_TIMEOUT.min} to ${TOKEN_TIMEOUT.max}.`,
      ),
      '403': TOKEN_REFUSED,
    },
  };
}

const getToken: Operation = {
  operationId: 'getToken',
  summary: 'Get a temporary token',
  description: "A token of the caller's account, expired or not. API keys only.",
  tags: ['Tokens'],
  parameters: [idParameter('token')],
  responses: {
    '200': success('The token.', schemaRef('Token')),
    '403': TOKEN_REFUSED,
    '404': failure("No such token, or another account's."),
  },
};

const deleteToken: Operation = {
  operationId: 'deleteToken',
  summary: 'Delete a temporary token',
  description: 'The token is refused (401) from then on. API keys only.',
  tags: ['Tokens'],
  parameters: [idParameter('token')],
  responses: {
    '204': success('Deleted; no body.', null),
    '403': TOKEN_REFUSED,
    '404': failure("No such token, or another account's."),
  },
};

const getAccount: Operation = {
  operationId: 'getAccount',
  summary: 'Get the account (beta)',
  description: 'The account of the calling API key, with its users and keys. API keys only.',
  tags: ['Account'],
  responses: {
    '200': success('The account.', schemaRef('Account')),
    '403': TOKEN_REFUSED,
  },
};

/** The operations of one version, by path: the same set the v2 routes register for it. */
export function apiPaths(context: OperationContext): Record<string, PathItem> {
  const { version } = context;
  const paths: Record<string, PathItem> = {
    '/ping': { get: ping },
    '/files': { post: createFile(context) },
    '/files/{id}': { get: getFile },
    '/files/async': { post: createFileAsync(context) },
    '/files/fetch': { post: fetchFile(context) },
    '/auth/tokens': { post: createToken('createToken', '') },
    '/auth/tokens/': {
      post: createToken('createTokenTrailingSlash', ' The same as POST /auth/tokens.'),
    },
    '/auth/tokens/{id}': { get: getToken, delete: deleteToken },
  };
  if (version !== 'v2.0') paths['/account.json'] = { get: getAccount };
  if (version === 'v2.2') paths['/files/{id}/trace'] = { get: getTrace };
  for (const item of Object.values(paths)) {
    for (const [method, operation] of Object.entries(item) as Array<[keyof PathItem, Operation]>) {
      item[method] = authenticated(operation);
    }
  }
  return paths;
}
