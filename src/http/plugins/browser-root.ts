import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { originPath } from '../legacy-path.js';

/**
 * Whether a request's Accept header names text/html (with a quality above 0): a browser's does;
 * an API client's (`*\/*`, application/json, none) does not. One pass over a header Node bounds.
 */
function asksForHtml(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  if (accept === undefined) return false;
  return accept.split(',').some((range) => {
    const [type = '', ...parameters] = range.split(';');
    if (type.trim().toLowerCase() !== 'text/html') return false;
    const quality = parameters.find((parameter) => /^\s*q\s*=/i.test(parameter));
    return quality === undefined || Number(quality.split('=')[1]) > 0;
  });
}

/**
 * A browser asking for `/` (someone typing the address `npm start` printed) goes to the web
 * console; any other request for `/` gets the 404 it always did. Decided before the 404, which
 * answers unrouted requests in the error handler's onRequest hook: registered before it.
 */
export const browserRoot = fp(async (app: FastifyInstance) => {
  app.addHook('onRequest', (request, reply, done) => {
    if (
      !request.is404 ||
      (request.method !== 'GET' && request.method !== 'HEAD') ||
      originPath(request.url.split('?')[0] ?? '') !== '/' ||
      !asksForHtml(request)
    ) {
      done();
      return;
    }
    // Answered here: the hooks after this one and the 404 do not run.
    reply.redirect('/console', 303);
  });
});
