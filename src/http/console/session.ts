import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ConsoleSession, csrfMatches } from '../../accounts/console-access.js';
import { HttpError } from '../http-error.js';

export const SESSION_COOKIE = 'assay_console';
/** A browser that signed in before (its device token): sent to the sign-in form only. */
const DEVICE_COOKIE = 'assay_console_device';

/** A cookie's value, read from a bounded header (no cookie library needed for two names). */
function cookie(request: FastifyRequest, wanted: string): string {
  const header = request.headers.cookie;
  if (typeof header !== 'string' || header.length > 8192) return '';
  for (const part of header.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === wanted) return value.join('=');
  }
  return '';
}

/** The session cookie's value. */
export function sessionToken(request: FastifyRequest): string {
  return cookie(request, SESSION_COOKIE);
}

/** The device token of an earlier sign-in in this browser, if it sent one. */
export function deviceToken(request: FastifyRequest): string {
  return cookie(request, DEVICE_COOKIE);
}

/** Under TLS, or behind a trusted proxy that says the client used https. */
function secure(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}

/** Writes one of the console's cookies: HttpOnly, SameSite=Strict, Secure under https. */
function writeCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  cookie: { name: string; value: string; path: string; maxAgeMs: number },
) {
  const attributes = [
    `${cookie.name}=${cookie.value}`,
    `Path=${cookie.path}`,
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.floor(cookie.maxAgeMs / 1000)}`,
    ...(secure(request) ? ['Secure'] : []),
  ];
  reply.header('set-cookie', attributes.join('; '));
}

export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  maxAgeMs: number,
) {
  writeCookie(request, reply, { name: SESSION_COOKIE, value: token, path: '/console', maxAgeMs });
}

/** Remembers that this browser signed in (its device token), for the sign-in form alone. */
export function setDeviceCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  maxAgeMs: number,
) {
  writeCookie(request, reply, {
    name: DEVICE_COOKIE,
    value: token,
    path: '/console/sign-in',
    maxAgeMs,
  });
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply) {
  writeCookie(request, reply, { name: SESSION_COOKIE, value: '', path: '/console', maxAgeMs: 0 });
}

/**
 * Whether a browser says another site's page sent the request: Sec-Fetch-Site (every current
 * browser sends it), else an Origin that is not this host (an opaque `null` origin included). A
 * client that sends neither (curl, a script) is not a browser another site's page drives.
 */
export function fromAnotherSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = request.headers.origin;
  if (typeof origin !== 'string') return false;
  try {
    const from = new URL(origin);
    // The same scheme's URL of this host: a default port is dropped from both alike.
    return from.host !== new URL(`${from.protocol}//${request.host}`).host;
  } catch {
    return true;
  }
}

/** Sent to the sign-in page (a GET) or refused (anything else) when there is no session. */
export class SignInRequired extends Error {}

/** The request's session; every page and action but signing in needs one. */
export function sessionOf(request: FastifyRequest): ConsoleSession {
  if (request.consoleSession === null) throw new SignInRequired('sign in first');
  return request.consoleSession;
}

/** An operator's session, else 404 (the pages do not exist for others). */
export function operatorSessionOf(request: FastifyRequest): ConsoleSession {
  const session = sessionOf(request);
  if (!session.user.operator) throw new HttpError(404, 'no such page');
  return session;
}

/** The form of a state change: it must carry the session's CSRF token, else 403. */
export function checkedForm(request: FastifyRequest): {
  session: ConsoleSession;
  form: URLSearchParams;
} {
  const session = sessionOf(request);
  const form = request.body instanceof URLSearchParams ? request.body : new URLSearchParams();
  if (!csrfMatches(sessionToken(request), form.get('csrf') ?? '')) {
    throw new HttpError(
      403,
      'the form is stale or was not sent from the console: reload the page and try again',
    );
  }
  return { session, form };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the console's hook on every console route: null without a session. */
    consoleSession: ConsoleSession | null;
  }
}
