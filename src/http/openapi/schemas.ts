import {
  type ObjectOptions,
  type Static,
  type TProperties,
  type TSchema,
  Type,
} from '@sinclair/typebox';
import { DETECTION_CATEGORIES } from '../../domain/records.js';

/**
 * Response bodies of the v2.x API as JSON Schema (TypeBox), the one description of their shape:
 * the published descriptor embeds them, and routes check their bodies against their `Static` types
 * (file results are checked against the descriptor by the tests).
 */

const HEX_ID = '^[0-9a-f]{32}$';

/** Objects list every field the service sends: an unlisted one is drift, and the tests say so. */
const closed = <T extends TProperties>(properties: T, options: ObjectOptions = {}) =>
  Type.Object(properties, { ...options, additionalProperties: false });

/** An object used as a map: any keys, every value of one shape (typed as a Record, too). */
const mapOf = <T extends TSchema>(values: T, description: string) =>
  Type.Unsafe<Record<string, Static<T>>>({
    type: 'object',
    additionalProperties: values,
    description,
  });

const id = (what: string) =>
  Type.String({ pattern: HEX_ID, description: `${what}: 32 lowercase hexadecimal characters.` });

/** Dates of files, tokens and trace events: ISO 8601 UTC with milliseconds. */
const preciseDate = (description: string) =>
  Type.String({ format: 'date-time', description, examples: ['2026-11-22T10:00:00.123Z'] });

/** Account dates have second precision; null when the event never happened. */
const secondDate = (description: string) =>
  Type.Union(
    [Type.String({ format: 'date-time', examples: ['2026-11-22T10:00:00Z'] }), Type.Null()],
    {
      description,
    },
  );

export const ErrorBody = closed(
  { error: Type.String({ description: 'What went wrong, for a human reader.' }) },
  { description: 'Body of every unsuccessful response.' },
);

export const PingResult = closed({
  message: Type.Literal('pong'),
  key: Type.String({
    description: 'Id of the API key, or of the temporary token, that authenticated the request.',
  }),
});

export const Metadata = mapOf(
  Type.String(),
  'The `metadata[key]` arguments given at submission, keys trimmed; `{}` when none were given. ' +
    'The service adds no keys of its own. Absent in v2.0.',
);

/** Builds the two file shapes for a version: v2.0 predates metadata. */
function withMetadata<T extends Record<string, TSchema>>(properties: T, metadata: boolean) {
  return metadata ? { ...properties, metadata: Metadata } : properties;
}

const processedProperties = {
  id: id('Id of the item, its persistent locator'),
  checksum: Type.String({
    pattern: '^[0-9a-f]{40}$',
    description: 'SHA-1 of the content, 40 hexadecimal characters.',
  }),
  content_length: Type.Integer({ minimum: 0, description: 'Size of the content in bytes.' }),
  findings: Type.Array(Type.String(), {
    description:
      'Everything the engines found, as dot-separated identifiers such as ' +
      '`content.malicious.eicar-test-signature`, `content.image.nsfw.nudity` or ' +
      '`content.en.language.nsfw.0`. Empty when nothing was found; never null.',
  }),
  creation_date: preciseDate('When the item was received.'),
  content_type: Type.String({
    description: 'Media type detected from the content, e.g. `application/pdf`, `text/plain`.',
  }),
};

const failedProperties = {
  id: id('Id of the item'),
  creation_date: preciseDate('When the item was received.'),
  error: Type.String({
    description: 'Why there is no verdict, e.g. the remote content could not be downloaded.',
  }),
};

export function fileResultSchema(metadata: boolean) {
  return closed(withMetadata(processedProperties, metadata), {
    description: 'A processed item and what the engines found in it.',
  });
}

export function failedItemSchema(metadata: boolean) {
  return closed(withMetadata(failedProperties, metadata), {
    description:
      'An item that was accepted but could not be processed (a fetch whose download failed). ' +
      'It has an `error` and never `findings`, so it cannot be mistaken for clean content.',
  });
}

/** v2.1 and later, the richest shape; routes check themselves against these. */
export const FileResult = fileResultSchema(true);
export const FailedItem = failedItemSchema(true);

export type PingBody = Static<typeof PingResult>;

export const Acknowledgement = closed(
  { id: id('Id of the accepted item; GET /files/{id} answers 404 until it is processed') },
  { description: 'Answer to an asynchronous submission.' },
);

export type AcknowledgementBody = Static<typeof Acknowledgement>;

export const TokenResource = closed(
  {
    id: id('Token id; the Basic-auth user name, with an empty password'),
    creation_date: preciseDate('When the token was created.'),
    expiration_date: preciseDate('creation_date plus the timeout; the token is refused after it.'),
  },
  { description: 'A temporary authentication token.' },
);

export type TokenBody = Static<typeof TokenResource>;

export const TraceResult = closed(
  {
    id: id('Id of the item'),
    events: Type.Array(
      closed({
        timestamp: preciseDate('When it happened.'),
        message: Type.String({
          description:
            'What happened: received, downloaded, an engine verdict, processed, a callback attempt.',
        }),
      }),
      { description: 'In the order they happened.' },
    ),
  },
  { description: 'What has happened to an item so far, finished or not.' },
);

export type TraceBody = Static<typeof TraceResult>;

export const AccountResource = closed(
  {
    name: Type.String(),
    balance: Type.Integer({
      description:
        'Credits left. Each item takes one when it is accepted; an item that ends without a ' +
        'verdict (no result, or a result with an error) gives it back. Below zero only for an ' +
        'account that does not enforce its balance.',
    }),
    starting_balance: Type.Integer(),
    billing_email: Type.String(),
    subscription: Type.String({ description: 'Name of the subscription plan.' }),
    creation_date: secondDate('When the account was created.'),
    modification_date: secondDate('When the account last changed.'),
    users: mapOf(
      closed({
        creation_date: secondDate('When the user was added.'),
        last_login_date: secondDate('Last login; null when never.'),
        last_login: secondDate('Same as last_login_date, under the name some clients read.'),
      }),
      'Users of the account, by e-mail address.',
    ),
    keys: mapOf(
      closed({
        active: Type.Boolean({ description: 'Disabled keys are refused with 401.' }),
        detection_categories_enabled: Type.Array(
          Type.Union(DETECTION_CATEGORIES.map((category) => Type.Literal(category))),
        ),
        last_seen_date: secondDate('Last authenticated use, to the minute; null when never.'),
        creation_date: secondDate('When the key was created.'),
        tags: Type.Array(Type.String(), { description: 'Free labels.' }),
      }),
      'API keys of the account, by key id.',
    ),
  },
  { description: 'The account of the API key that asks (beta).' },
);

export type AccountBody = Static<typeof AccountResource>;

/** Named schemas of a version's descriptor, referenced as `#/components/schemas/<name>`. */
export function componentSchemas(metadata: boolean, account: boolean, trace: boolean) {
  return {
    Error: ErrorBody,
    Ping: PingResult,
    FileResult: fileResultSchema(metadata),
    FailedItem: failedItemSchema(metadata),
    Acknowledgement,
    Token: TokenResource,
    ...(account ? { Account: AccountResource } : {}),
    ...(trace ? { Trace: TraceResult } : {}),
  };
}
