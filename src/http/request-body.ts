import type { FastifyError } from 'fastify';
import { HttpError } from './http-error.js';

/** The most a URL-encoded form (fetch, tokens, v1.0 fetch) may take; uploads are multipart. */
export const MAX_FORM_BYTES = 1024 * 1024;

/** Errors that mean a bug in the code, wherever they are thrown: never the client's fault. */
const PROGRAMMING_ERRORS = [TypeError, RangeError, ReferenceError, SyntaxError];

/**
 * What the client sent, as it is read: a failure while reading it (a malformed multipart body,
 * a part cut short, a connection gone) is about that body, so it becomes a 400 that says `what`
 * could not be read. Classified by where it was raised, not by the words of its message: busboy's
 * errors carry no code, and a server error (a full disk, a corrupt database) raised while handling
 * the content comes from the consumer's side of the loop, which this never touches.
 * @fastify/multipart's own errors keep their code and status (413 for its limits).
 */
export async function* fromClient<T>(source: AsyncIterable<T>, what: string): AsyncGenerator<T> {
  try {
    for await (const item of source) yield item;
  } catch (error) {
    throw clientBodyError(error, what);
  }
}

function clientBodyError(error: unknown, what: string): unknown {
  if (!(error instanceof Error) || error instanceof HttpError) return error;
  if (PROGRAMMING_ERRORS.some((type) => error instanceof type)) return error;
  const { code, statusCode } = error as Partial<FastifyError>;
  // The parser's own classification: its limits (413), a premature close (400), its bugs (500).
  if (typeof code === 'string' && code.startsWith('FST_') && statusCode !== undefined) return error;
  return new HttpError(400, `${what}: ${error.message}`, {}, error);
}
