import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DEVICE_MS } from '../../../accounts/console-access.js';
import { failureBucketOf } from '../../plugins/client-address.js';
import { html } from '../html.js';
import { notice, page } from '../layout.js';
import {
  checkedForm,
  clearSessionCookie,
  deviceToken,
  fromAnotherSite,
  sessionToken,
  setDeviceCookie,
  setSessionCookie,
} from '../session.js';

/**
 * Where to go after signing in: a console path only (never another site), of printable ASCII
 * but the backslash (a Location header cannot carry other characters; a browser sends them
 * percent-encoded).
 */
function nextPage(raw: string | null | undefined): string {
  return typeof raw === 'string' &&
    /^\/console(?:[/?][\x21-\x5b\x5d-\x7e]*)?$/.test(raw) &&
    !raw.startsWith('//')
    ? raw
    : '/console';
}

function signInPage(next: string, message: string | null, email = ''): string {
  return page({
    title: 'Sign in',
    session: null,
    body: html`${notice(message, 'error')}
<form method="post" action="/console/sign-in">
  <input type="hidden" name="next" value="${next}">
  <label for="email">E-mail address</label>
  <input id="email" name="email" type="email" autocomplete="username" required value="${email}">
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <p><button type="submit">Sign in</button></p>
</form>`,
  });
}

function formOf(request: FastifyRequest): URLSearchParams {
  return request.body instanceof URLSearchParams ? request.body : new URLSearchParams();
}

/** GET and POST /console/sign-in, POST /console/sign-out. */
export default async function signIn(app: FastifyInstance) {
  const access = app.services.console;
  const { sessionMs } = app.services.config.console;

  app.get<{ Querystring: { next?: string } }>('/sign-in', async (request, reply) => {
    if (request.consoleSession !== null) return reply.redirect(nextPage(request.query.next), 303);
    return reply.type('text/html').send(signInPage(nextPage(request.query.next), null));
  });

  app.post('/sign-in', async (request, reply) => {
    const form = formOf(request);
    const email = form.get('email') ?? '';
    const next = nextPage(form.get('next'));
    // Login CSRF: another site's form would sign the browser in to the attacker's session.
    if (fromAnotherSite(request)) {
      return reply
        .code(403)
        .type('text/html')
        .send(
          signInPage(next, 'Sign in from this page: a sign-in sent from another site is refused.'),
        );
    }
    const outcome = await access.signIn(email, form.get('password') ?? '', {
      client: failureBucketOf(request.ip),
      device: deviceToken(request),
    });
    if (!outcome.ok) {
      if (outcome.reason === 'limited') {
        reply.header('retry-after', String(outcome.retryAfterSeconds));
        return reply
          .code(429)
          .type('text/html')
          .send(
            signInPage(
              next,
              `Too many sign-in attempts: try again in ${outcome.retryAfterSeconds} seconds.`,
              email,
            ),
          );
      }
      return reply
        .code(401)
        .type('text/html')
        .send(signInPage(next, 'The e-mail address or the password is wrong.', email));
    }
    setSessionCookie(request, reply, outcome.token, sessionMs);
    setDeviceCookie(request, reply, outcome.deviceToken, DEVICE_MS);
    return reply.redirect(next, 303);
  });

  app.post('/sign-out', async (request, reply) => {
    checkedForm(request);
    await access.signOut(sessionToken(request));
    clearSessionCookie(request, reply);
    return reply.redirect('/console/sign-in', 303);
  });
}
